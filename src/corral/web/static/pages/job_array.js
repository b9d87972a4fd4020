// An array job's page shows its tasks: the array itself never runs (its tasks do), so in place of
// logs and charts it lists each task with its state and a link to the task's page, and says what
// the tasks add up to. GET /api/v1/jobs/ID/tasks.

import {h, replace} from "../lib/dom.js";
import {api, errorState, isAbort} from "../lib/api.js";
import {fmtDuration, fmtNumber, stateBadge, timeEl, toEpoch} from "../lib/format.js";

/** The record of an array (submitted with --array), not one of its tasks. */
export function isArrayJob(job) {
  return job.array !== null && job.array !== undefined && (job.array_task_id === null || job.array_task_id === undefined);
}

// How an array's own state follows from its tasks' (corral.core.jobspec.arrays.array_state).
const ENDED_BECAUSE = {
  COMPLETED: "every task completed",
  FAILED: "a task ended other than completed or cancelled",
  CANCELLED: "it was cancelled, or its tasks were",
};

export class ArrayTasks {
  constructor(id, ctx) {
    this.id = id;
    this.ctx = ctx;
    this.body = h("div", {}, h("p", {class: "muted"}, "Loading the tasks…"));
    this.el = h("section", {class: "card", "aria-labelledby": "tasks-h", "data-testid": "array-tasks", hidden: true},
      h("h2", {id: "tasks-h"}, "Tasks"), this.body);
  }

  async load() {
    let answer;
    try {
      answer = await api(`/api/v1/jobs/${encodeURIComponent(this.id)}/tasks`, {signal: this.ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      replace(this.body, errorState(err, () => this.load(), {what: "the array's tasks"}));
      return;
    }
    this.render(answer);
  }

  render({array, summary, tasks, total}) {
    const counts = Object.entries(summary.states).sort(([a], [b]) => a.localeCompare(b));
    const ended = ENDED_BECAUSE[array.state];
    const head = h("p", {"data-testid": "array-summary"},
      h("strong", {}, `${fmtNumber(summary.tasks)} task${summary.tasks === 1 ? "" : "s"}`), ": ",
      counts.map(([state, n], i) => [i ? ", " : "", `${fmtNumber(n)} ${state.toLowerCase().replaceAll("_", " ")}`]),
      summary.waiting ? h("span", {class: "muted"}, ` (waiting: ${summary.waiting})`) : null,
      ". ",
      ended ? `The array ended ${array.state.toLowerCase()}: ${ended}.`
        : `${fmtNumber(summary.ended)} of ${fmtNumber(summary.tasks)} ended so far.`);
    if (!tasks.length) {
      replace(this.body, head, h("p", {class: "muted"}, "No task has started yet."));
      return;
    }
    const shown = tasks.length < total
      ? h("p", {class: "muted small"}, `The first ${fmtNumber(tasks.length)} of ${fmtNumber(total)} started tasks; `,
        h("code", {}, "corral queue"), " and ", h("code", {}, "corral history"), " list them all.")
      : null;
    replace(this.body, head,
      h("div", {class: "table-box"}, h("table", {class: "grid"},
        h("thead", {}, h("tr", {}, ["Task", "State", "Exit", "Started", "Ran"].map((t) => h("th", {scope: "col"}, t)))),
        h("tbody", {}, tasks.map((t) => {
          const ran = t.start_time && t.end_time ? toEpoch(t.end_time) - toEpoch(t.start_time) : null;
          return h("tr", {"data-testid": "array-task-row", "data-task-id": t.array_task_id, "data-state": t.state},
            h("td", {}, h("a", {href: `/jobs/${t.ref}`}, t.ref)),
            h("td", {}, stateBadge(t.state, {held: t.held})),
            h("td", {class: "num"}, t.exit_code !== null && t.exit_code !== undefined ? String(t.exit_code) : "—"),
            h("td", {class: "small"}, t.start_time ? timeEl(t.start_time) : "—"),
            h("td", {class: "num"}, ran !== null ? fmtDuration(ran) : "—"));
        })))),
      shown);
  }
}
