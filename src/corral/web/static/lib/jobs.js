// What a job's fields mean to a reader: pending reasons in words, resources in one line.

import {h} from "./dom.js";
import {fmtMB, fmtLimit} from "./format.js";

// Slurm's reason codes (corral uses the same), as a sentence that says what to expect or do.
const REASONS = {
  None: "not looked at yet; the next scheduling pass decides",
  Resources: "first in line; waits for GPUs, CPUs or memory to free up",
  Priority: "a higher-priority job ahead of it waits; it runs after that one",
  BadConstraints: "no node can run it any more; change its resources (corral update) or cancel it",
  JobHeldUser: "held; release it to let it run",
  PartitionTimeLimit: "its time limit is longer than its partition allows; shorten it",
  QOSMaxJobsPerUserLimit: "its user already runs as many jobs as the QoS allows",
  QOSMaxGRESPerUser: "starting it would give its user more GPUs than the QoS allows",
  Dependency: "waits for the jobs it depends on",
  DependencyNeverSatisfied: "what it depends on can no longer happen; cancel it or change the dependency",
  ReqNodeNotAvail: "only drained GPUs or nodes, or GPUs in use outside corral, could run it; it runs once an admin resumes them or the outside process ends",
};

/** The reason code and what it means. */
export function reasonText(reason) {
  if (!reason) return "";
  const meaning = REASONS[reason.split(",")[0]];  // "ReqNodeNotAvail, node1 GPU 2 drained: XID 79": by its code
  return meaning ? `${reason}: ${meaning}` : reason;
}

/** "2 × A100 · 8 CPUs · 32 GB · 4h" */
export function resourcesText(job) {
  const parts = [];
  if (job.gpus) parts.push(`${job.gpus} × ${job.gpu_type || "GPU"}`);
  if (job.cpus) parts.push(`${job.cpus} CPU${job.cpus === 1 ? "" : "s"}`);
  if (job.mem_mb) parts.push(fmtMB(job.mem_mb));
  if (job.time_limit_s) parts.push(`limit ${fmtLimit(job.time_limit_s)}`);
  return parts.join(" · ") || "—";
}

/** The job's command as one line ("python train.py --lr 0.1"), or its script's first line. */
export function commandText(job) {
  if (job.command && job.command.length) return job.command.map(quoteArg).join(" ");
  return job.script ? "(batch script)" : "—";
}

function quoteArg(arg) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${String(arg).replaceAll("'", "'\\''")}'`;
}

/** Which actions make sense now: cancel (pending or running), hold (pending, not held), release (held). */
export function allowedActions(job) {
  const pending = job.state === "PENDING";
  return {
    cancel: pending || job.state === "RUNNING",
    hold: pending && !job.held,
    release: pending && !!job.held,
  };
}

/** A job link: "#12 train". */
export function jobLink(id, name = null) {
  return h("a", {href: `/jobs/${id}`}, `#${id}`, name ? ` ${name}` : "");
}
