// "Run again" and "Run again with changes", shared by the job and run pages. A rerun is its owner's job,
// whoever asks: it runs as them. So only its owner or an admin is offered them (the server checks again), and
// an admin rerunning another user's job is shown whose it is and confirms first: then, and only then, the
// request names the owner (`confirm_owner`), which the server asks of anyone but the owner.

import {h, replace} from "./dom.js";
import {post, isAbort} from "./api.js";
import {identity} from "./session.js";

/** Whether the viewer may run `job` again: its owner or an admin, with a credential that may submit. */
export function mayRerun(job) {
  const me = identity();
  if (!me || me.scope === "read" || job.interactive) return false;
  return me.admin || me.scope === "admin" || me.user === job.user;
}

/** Whether a rerun of `job` by the viewer runs as someone else (its owner): then the viewer confirms first. */
export function rerunsAsOwner(job) {
  const me = identity();
  return Boolean(me && me.user !== job.user);
}

/**
 * The controls for job `ref` (its id, or ID_TASK): "Run again" submits it as it was and goes to the new
 * job; "Run again with changes" opens the New job form prefilled. For another user's job, "Run again" first
 * says whose it is and asks. `onError(err)` shows a refusal; `state` (the page's, kept across redraws)
 * remembers a confirmation under way.
 */
export function rerunButtons(job, ref, {navigate, signal, onError, state = {}}) {
  if (!mayRerun(job)) return [];
  const owner = job.user;
  const asOwner = rerunsAsOwner(job);
  const box = h("span", {class: "rerun", "data-testid": "rerun-box"});

  async function send(button) {
    button.disabled = true;
    try {
      const made = await post(`/api/v1/jobs/${encodeURIComponent(ref)}/resubmit`, asOwner ? {confirm_owner: owner} : {}, {signal});
      state.confirming = null;
      navigate(`/jobs/${made.id}`);
    } catch (err) {
      if (isAbort(err)) return;
      button.disabled = false;
      onError(err);
    }
  }

  function draw() {
    const changes = h("a", {class: "button", href: `/new?from=${encodeURIComponent(ref)}`, "data-testid": "rerun-changes"},
      "Run again with changes");
    if (state.confirming === ref) {
      const yes = h("button", {type: "button", "data-testid": "rerun-confirm-yes", onclick: () => send(yes)}, `Run it again as ${owner}`);
      const no = h("button", {type: "button", "data-testid": "rerun-confirm-no",
        onclick: () => { state.confirming = null; draw(); focus("rerun"); }}, "Keep");
      replace(box, h("span", {class: "confirm", role: "group", "aria-label": "Confirm running it again", "data-testid": "rerun-confirm"},
        `Job #${ref} is `, h("strong", {"data-testid": "rerun-owner"}, owner), `'s: it runs again as ${owner} `,
        `(their account, limits and files), not as you (${identity()?.user}). `, yes, " ", no));
      yes.focus();
      return;
    }
    const again = h("button", {type: "button", "data-testid": "rerun", "data-owner": owner,
      onclick: () => asOwner ? (state.confirming = ref, draw()) : send(again)}, asOwner ? `Run again as ${owner}…` : "Run again");
    replace(box, again, " ", changes);
  }

  function focus(testid) {
    const el = box.querySelector(`[data-testid=${testid}]`);
    if (el) el.focus();
  }

  draw();
  return [box];
}
