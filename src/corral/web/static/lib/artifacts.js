// A run's artifacts as the dashboard reads them: GET /api/v1/runs/REF/artifacts/content?path=P
// (only the run's owner or an admin; with a login, the session's key must go with the request).

import {h} from "./dom.js";
import {withQuery} from "./api.js";
import {sessionHeaders} from "./sessionkey.js";

/** Where an artifact's bytes are served. */
export function artifactUrl(runRef, path) {
  return withQuery(`/api/v1/runs/${encodeURIComponent(runRef)}/artifacts/content`, {path});
}

/** A link that downloads the artifact: a plain link where no login is needed; with a login, the
 * session's key must go with the request, so the bytes are fetched and handed to the browser. */
export function downloadLink(runRef, a, label = null) {
  const href = artifactUrl(runRef, a.path);
  const name = a.path.split("/").pop();
  return h("a", {href, download: name, "data-testid": "artifact-download", class: "path",
    onclick: async (e) => {
      const headers = sessionHeaders();
      if (!Object.keys(headers).length) return;
      e.preventDefault();
      const response = await fetch(href, {headers});
      if (!response.ok) { alert(`Could not download ${a.path}: ${response.status}`); return; }
      const url = URL.createObjectURL(await response.blob());
      const link = h("a", {href: url, download: name});
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    }}, label ?? h("code", {}, a.path));
}
