// "Run again" and "Run again with changes", shared by the job and run pages: a rerun is the logged-in
// user's own job, so only its owner or an admin is offered them (the server checks again).

import {h} from "./dom.js";
import {post, isAbort} from "./api.js";
import {identity} from "./session.js";

/** Whether the viewer may run `job` again: its owner or an admin, with a credential that may submit. */
export function mayRerun(job) {
  const me = identity();
  if (!me || me.scope === "read" || job.interactive) return false;
  return me.admin || me.scope === "admin" || me.user === job.user;
}

/**
 * The two buttons for job `ref` (its id, or ID_TASK): "Run again" submits it as it was and goes to the new
 * job; "Run again with changes" opens the New job form prefilled. `onError(err)` shows a refusal.
 */
export function rerunButtons(job, ref, {navigate, signal, onError}) {
  if (!mayRerun(job)) return [];
  const again = h("button", {type: "button", "data-testid": "rerun", onclick: async () => {
    again.disabled = true;
    try {
      const made = await post(`/api/v1/jobs/${encodeURIComponent(ref)}/resubmit`, {}, {signal});
      navigate(`/jobs/${made.id}`);
    } catch (err) {
      if (isAbort(err)) return;
      again.disabled = false;
      onError(err);
    }
  }}, "Run again");
  const changes = h("a", {class: "button", href: `/new?from=${encodeURIComponent(ref)}`, "data-testid": "rerun-changes"},
    "Run again with changes");
  return [again, changes];
}
