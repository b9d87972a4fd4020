// New job (/new): a command or a batch script, its resources, time, partition, environment and labels, and
// optionally a sweep's parameters; /new?from=ID is "Run again with changes": job ID's spec prefilled, and
// only what was changed sent to POST /api/v1/jobs/ID/resubmit. The server checks everything, as for
// `corral submit`; a refusal is shown beside the field it names. Another user's job runs again as its owner: the
// form says so, and an admin ticks a box that confirms it before the request names the owner (`confirm_owner`).

import {h, replace} from "../lib/dom.js";
import {api, post, errorState, isAbort} from "../lib/api.js";
import {rerunsAsOwner} from "../lib/relaunch.js";

// a server field's name -> the form's field that sets it
const FIELD_OF = {
  command: "command", script: "script", script_args: "script", name: "name", gpus: "gpus", gres: "gpus",
  gpus_per_task: "gpus", gpu_type: "gpus", cpus: "cpus", cpus_per_gpu: "cpus", mem: "mem", mem_mb: "mem",
  time: "time", time_limit_s: "time", partition: "partition", env: "env", export: "env", labels: "labels",
  workdir: "workdir", submit_dir: "workdir", params: "params", samples: "samples", seed: "seed",
  concurrency: "concurrency", metric: "metric", method: "params", confirm_owner: "confirm-owner",
};

/** A command line split into words as a shell would for plain quoting ('...', "...", backslash). */
export function splitWords(text) {
  const words = [];
  let word = null, quote = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') { quote = c; word = word ?? ""; }
    else if (c === "\\" && i + 1 < text.length) { word = (word ?? "") + text[++i]; }
    else if (/\s/.test(c)) { if (word !== null) words.push(word); word = null; }
    else word = (word ?? "") + c;
  }
  if (word !== null) words.push(word);
  return words;
}

function quoteWord(w) {
  return /^[A-Za-z0-9_@%+=:,./{}-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

function pairs(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t) continue;
    const at = t.indexOf("=");
    out[at < 0 ? t : t.slice(0, at)] = at < 0 ? "" : t.slice(at + 1);
  }
  return out;
}

export function mount(root, ctx) {
  const from = ctx.query().get("from");
  const status = h("div", {});
  const inputs = {};
  const errors = {};
  let original = null;  // the rerun's job, as the API shows it
  let owner = null;  // its owner, when that is not the viewer: it runs again as them, once confirmed
  const ownerBox = h("div", {hidden: true});

  function field(name, label, input, hint = null) {
    input.id = `f-${name}`;
    input.setAttribute("data-testid", `field-${name}`);
    input.name = name;
    inputs[name] = input;
    errors[name] = h("p", {class: "field-error", role: "alert", "data-testid": `field-error-${name}`, hidden: true});
    return h("div", {class: "field"}, h("label", {for: input.id}, label), input,
      hint ? h("p", {class: "hint small muted"}, hint) : null, errors[name]);
  }
  const text = (placeholder = "") => h("input", {type: "text", placeholder});
  const area = (rows, placeholder = "") => h("textarea", {rows, placeholder});

  const formError = h("p", {class: "error-state", role: "alert", "data-testid": "form-error", hidden: true});
  const submit = h("button", {type: "submit", "data-testid": "new-job-submit"}, from ? "Run again" : "Submit");
  const form = h("form", {class: "new-job", "data-testid": "new-job-form", "data-mode": from ? "rerun" : "new", novalidate: true},
    field("command", "Command", text("python train.py --lr {lr}"), "A program and its arguments; or a batch script below."),
    field("script", "Batch script", area(5, "#!/bin/sh\n#SBATCH --gpus=1\npython train.py"), "#SBATCH lines are read as by sbatch."),
    h("div", {class: "field-row"},
      field("name", "Name", text()), field("gpus", "GPUs", text("1 or A100:2")), field("cpus", "CPUs per task", text("1")),
      field("mem", "Memory", text("16G")), field("time", "Time limit", text("2h, 30m, 1-00:00:00")),
      field("partition", "Partition", text("default"))),
    field("workdir", "Working directory", text("/home/you/project")),
    h("div", {class: "field-row"},
      field("env", "Environment (KEY=VALUE a line)", area(3)),
      field("labels", "Labels (KEY=VALUE a line)", area(3))),
    h("fieldset", {}, h("legend", {}, "Sweep (optional): one job array over parameters, {name} in the command"),
      field("params", "Parameters (a line each)", area(3, "lr=1e-4,3e-4,1e-3\nbs=32,64\nwd=loguniform:1e-6:1e-3"),
        "V1,V2,... for a grid; uniform:LOW:HIGH, loguniform:LOW:HIGH or int:LOW:HIGH with samples for a random search."),
      h("div", {class: "field-row"},
        field("samples", "Samples", text("a random search of N")), field("seed", "Seed", text()),
        field("concurrency", "At most at once", text("%N")), field("metric", "Metric to rank by", text("loss")))),
    ownerBox, formError, h("p", {}, submit));
  form.addEventListener("submit", (event) => { event.preventDefault(); send(); });
  root.append(h("h1", {}, from ? `Run job #${from} again with changes` : "New job"), status, form);

  function prefill(job) {
    const words = job.command || [];
    inputs.command.value = words.map(quoteWord).join(" ");
    inputs.script.value = job.script || "";
    inputs.name.value = job.name || "";
    inputs.gpus.value = job.gpu_type ? `${job.gpu_type}:${job.gpus}` : String(job.gpus ?? "");
    inputs.cpus.value = String(Math.max(1, Math.floor((job.cpus || 1) / Math.max(1, job.ntasks || 1))));
    inputs.mem.value = job.mem_mb ? `${job.mem_mb}M` : "";
    inputs.time.value = job.time_limit_s ? `${Math.ceil(job.time_limit_s / 60)}` : "";
    inputs.partition.value = job.partition || "";
    inputs.workdir.value = job.workdir || "";
    inputs.labels.value = Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join("\n");
    inputs.env.placeholder = "its environment is kept; KEY=VALUE lines add or change variables";
    for (const name of ["params", "samples", "seed", "concurrency", "metric"]) inputs[name].disabled = true;
  }

  if (from) {
    submit.disabled = true;
    api(`/api/v1/jobs/${encodeURIComponent(from)}`, {signal: ctx.signal}).then((job) => {
      original = job;
      prefill(job);
      if (rerunsAsOwner(job)) showOwner(job.user);
      submit.disabled = false;
    }, (err) => { if (!isAbort(err)) replace(status, errorState(err, null, {what: `job ${from}`})); });
  }

  /** Another user's job: say whose it is, and ask for the box that confirms it runs as them. */
  function showOwner(user) {
    owner = user;
    const box = h("input", {type: "checkbox"});
    replace(ownerBox, field("confirm-owner", `Run it as ${user}: job #${from} is ${user}'s, so it runs again as ${user} ` +
      "(their account, limits and files), not as you", box));
    ownerBox.hidden = false;
    submit.textContent = `Run again as ${user}`;
  }

  /** The request the form says: every field given (a new job), or only those changed (a rerun). */
  function request() {
    const body = {};
    const value = (name) => inputs[name].value.trim();
    const initial = original ? {
      command: (original.command || []).map(quoteWord).join(" "), script: original.script || "", name: original.name || "",
      gpus: original.gpu_type ? `${original.gpu_type}:${original.gpus}` : String(original.gpus ?? ""),
      cpus: String(Math.max(1, Math.floor((original.cpus || 1) / Math.max(1, original.ntasks || 1)))),
      mem: original.mem_mb ? `${original.mem_mb}M` : "", time: original.time_limit_s ? `${Math.ceil(original.time_limit_s / 60)}` : "",
      partition: original.partition || "", workdir: original.workdir || "",
      labels: Object.entries(original.labels || {}).map(([k, v]) => `${k}=${v}`).join("\n"),
    } : {};
    const changed = (name) => !original || value(name) !== (initial[name] ?? "");
    if (value("script") && changed("script")) body.script = inputs.script.value;
    else if (value("command") && changed("command")) body.command = splitWords(value("command"));
    for (const name of ["name", "gpus", "cpus", "mem", "time", "partition", "workdir"]) {
      if (value(name) && changed(name)) body[name] = value(name);
    }
    if (value("env")) body.env = pairs(inputs.env.value);
    if (changed("labels") && (value("labels") || original)) {
      const now = pairs(inputs.labels.value);
      if (original) for (const k of Object.keys(original.labels || {})) if (!(k in now)) now[k] = null;
      body.labels = now;
    }
    if (!original && value("params")) {
      body.params = inputs.params.value.split("\n").map((l) => l.trim()).filter(Boolean);
      for (const name of ["samples", "seed", "concurrency", "metric"]) if (value(name)) body[name] = value(name);
    }
    return body;
  }

  function clearErrors() {
    for (const el of Object.values(errors)) { el.hidden = true; el.textContent = ""; }
    for (const input of Object.values(inputs)) input.removeAttribute("aria-invalid");
    formError.hidden = true;
  }

  function showError(err) {
    const base = (err.field || "").split(".")[0];
    const name = FIELD_OF[base];
    const words = err.message + (err.hint && !err.message.includes(err.hint) ? ` (${err.hint})` : "");
    if (name && errors[name]) {
      errors[name].textContent = `✗ ${words}`;
      errors[name].hidden = false;
      inputs[name].setAttribute("aria-invalid", "true");
      inputs[name].setAttribute("aria-describedby", errors[name].id = `e-${name}`);
      inputs[name].focus();
    } else {
      formError.textContent = `✗ ${words}`;
      formError.hidden = false;
    }
  }

  async function send() {
    clearErrors();
    const body = request();
    if (!original && !body.command && !body.script) {
      showError({field: "command", message: "give a command to run, or a batch script"});
      return;
    }
    if (owner !== null) {
      if (!inputs["confirm-owner"].checked) {
        showError({field: "confirm_owner", message: `job #${from} is ${owner}'s: tick the box to run it again as ${owner}`});
        return;
      }
      body.confirm_owner = owner;
    }
    submit.disabled = true;
    try {
      if (original) {
        const made = await post(`/api/v1/jobs/${encodeURIComponent(from)}/resubmit`, body, {signal: ctx.signal});
        ctx.navigate(`/jobs/${made.id}`);
      } else if (body.params) {
        const made = await post("/api/v1/sweeps", body, {signal: ctx.signal});
        ctx.navigate(`/sweeps/${made.id}`);
      } else {
        const made = await post("/api/v1/jobs", body, {signal: ctx.signal});
        ctx.navigate(`/jobs/${made.id}`);
      }
    } catch (err) {
      if (isAbort(err)) return;
      showError(err);
    } finally {
      submit.disabled = false;
    }
  }
}
