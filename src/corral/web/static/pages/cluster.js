// Cluster (/): every node and GPU, who holds it, live utilization and memory; free/used totals; drained GPUs
// and nodes (`corral drain`) marked with their reason; GPUs a process outside corral uses, with its user, pid and memory;
// a shared GPU (`--gres=shard:N`, `--gpu-share`) with each of its jobs, its budget and what it uses, and the memory left.
// a GPU in MIG mode as a card holding its slices (each one a GPU, typed by its profile; NVML gives no utilization per slice).
// a GPU's health as NVML reports it (lost, throttled, uncorrectable ECC errors, its latest XID or throttle event);
// each GPU's NVLink group and the node's features (for --constraint).
// GET /api/v1/cluster; refetched on `samples` (a monitoring tick) and `jobs` (allocations changed).

import {h, replace, bar} from "../lib/dom.js";
import {api, errorState, emptyState, isAbort} from "../lib/api.js";
import {fmtMB, fmtPct, fmtRelative, fmtNumber} from "../lib/format.js";

export function mount(main, ctx) {
  const status = h("p", {class: "muted page-sub", "aria-live": "polite"});
  const totalsBox = h("section", {class: "totals", "aria-label": "Totals"});
  const nodesBox = h("div", {class: "nodes"}, h("p", {class: "muted"}, "Loading the cluster…"));
  main.append(h("div", {class: "page-head"}, h("h1", {}, "Cluster"), status), totalsBox, nodesBox);

  async function load() {
    let cluster;
    try {
      cluster = await api("/api/v1/cluster", {signal: ctx.signal});
    } catch (err) {
      if (isAbort(err)) return;
      totalsBox.replaceChildren();
      replace(nodesBox, errorState(err, load, {what: "the cluster"}));
      return;
    }
    render(cluster);
  }

  function render(cluster) {
    const t = cluster.totals || {};
    replace(totalsBox,
      total("GPUs", t.gpus_used, t.gpus, (v) => fmtNumber(v), "in use", t.gpus_drained, t.gpus_outside),
      total("CPUs", t.cpus_alloc, t.cpus, (v) => fmtNumber(v), "allocated"),
      total("Memory", t.mem_alloc_mb, t.mem_mb, fmtMB, "allocated"));
    status.textContent = cluster.sampled_at
      ? `GPU figures sampled ${fmtRelative(cluster.sampled_at)}`
      : "No GPU figures: no GPU driver answered, so only allocations are shown.";
    const nodes = cluster.nodes || [];
    if (!nodes.length) {
      replace(nodesBox, emptyState("No nodes: the server declares none. Start it with GPUs, e.g. ",
        h("code", {}, "corral up --gpus 4 --gpu-type A100"), "."));
      return;
    }
    replace(nodesBox, nodes.map(node));
  }

  load();
  ctx.refreshOn(["samples", "jobs"], load, {wait: 500});
}

function total(label, used, all, fmt, verb, drained = 0, outside = 0) {
  const known = Number.isFinite(used) && Number.isFinite(all) && all > 0;
  const free = known ? `${fmt(all - used - drained - outside)} free` + (drained ? ` · ${fmt(drained)} drained` : "")
    + (outside ? ` · ${fmt(outside)} in use outside corral` : "") : "—";
  return h("div", {class: "total card"},
    h("h2", {}, label),
    h("p", {class: "total-figure"}, `${fmt(used ?? 0)} / ${fmt(all ?? 0)}`, h("span", {class: "muted"}, ` ${verb}`)),
    bar(known ? used / all : null, free, {label}));
}

function node(n) {
  const gpus = n.gpus || [];
  return h("section", {class: "node card", "aria-label": `Node ${n.name}`, "data-node": n.name},
    h("div", {class: "node-head"},
      h("h2", {}, n.name),
      n.state ? h("span", {class: "drain-badge", "data-testid": "node-drain", title: drainTitle(n.reason, n.reason_by, n.reason_at)},
        `${n.state.toUpperCase()}: ${n.reason}`) : null,
      h("span", {class: "node-res"}, "CPUs ",
        bar(n.cpus ? n.cpus_alloc / n.cpus : null, `${n.cpus_alloc} / ${n.cpus} allocated`, {label: "CPUs"})),
      h("span", {class: "node-res"}, "Memory ",
        bar(n.mem_mb ? n.mem_alloc_mb / n.mem_mb : null, `${fmtMB(n.mem_alloc_mb)} / ${fmtMB(n.mem_mb)} allocated`, {label: "Memory"}))),
    linksLine(n),
    gpus.length
      ? h("ul", {class: "gpus"}, byParent(gpus).map(([parent, cards]) => parent === null
        ? gpuCard(n, cards[0]) : migCard(n, parent, cards)))
      : h("p", {class: "muted"}, "No GPUs on this node."));
}

// Whole GPUs on their own, MIG slices gathered under the GPU they are cut from, in NVML's order of the GPUs.
function byParent(gpus) {
  const groups = [];
  const slices = new Map();
  for (const g of gpus) {
    if (g.parent === null || g.parent === undefined) {
      groups.push([null, [g], g.index]);
    } else if (slices.has(g.parent)) {
      slices.get(g.parent).push(g);
    } else {
      const cards = [g];
      slices.set(g.parent, cards);
      groups.push([g.parent, cards, g.parent]);
    }
  }
  return groups.sort((a, b) => a[2] - b[2]).map(([parent, cards]) => [parent, cards]);
}

// A GPU in MIG mode: not schedulable as a whole, each slice a GPU of its own (its profile as its type).
function migCard(n, parent, slices) {
  const model = (slices[0].device_name || "").replace(/^NVIDIA\s+/, "").replace(/\s+MIG\s+\S+$/, "");
  const live = (n.mig_gpus || []).find((m) => m.index === parent) || {};
  const known = (v) => v !== null && v !== undefined;
  return h("li", {class: "gpu card mig", "data-testid": "mig-gpu", "data-index": parent, "data-node": n.name},
    h("div", {class: "gpu-head"},
      h("strong", {}, `GPU ${parent}`),
      h("span", {class: "muted"}, ` ${model ? model + " · " : ""}MIG, ${slices.length} slice${slices.length === 1 ? "" : "s"}`),
      known(live.temperature_c) || known(live.power_w)
        ? h("span", {class: "muted small"}, [known(live.temperature_c) ? ` · ${Math.round(live.temperature_c)} °C` : "",
          known(live.power_w) ? ` · ${Math.round(live.power_w)} W` : ""].join(""))
        : null),
    h("ul", {class: "gpus slices"}, slices.map((g) => gpuCard(n, g))));
}

function gpuCard(n, g) {
  const busy = g.job_id !== null && g.job_id !== undefined;
  const memFraction = g.memory_used_mb !== null && g.memory_used_mb !== undefined && g.mem_mb ? g.memory_used_mb / g.mem_mb : null;
  const drained = g.drained;
  const outside = g.outside || [];
  const shared = g.shared;
  return h("li", {class: "gpu card" + (busy ? " busy" : " free") + (drained ? " drained" : "") + (outside.length ? " outside" : "")
      + (shared ? " shared" : ""),
    "data-testid": "gpu-card", "data-index": g.index, "data-node": n.name, "data-job-id": busy ? g.job_id : "",
    "data-drain": g.drain_state || "", "data-outside": outside.map((p) => p.pid).join(","),
    "data-shared": shared ? shared.jobs.map((j) => j.job_id).join(",") : "",
    "data-nvlink": gpuList(g.nvlink || [])},
    h("div", {class: "gpu-head"},
      h("strong", {}, `GPU ${g.index}`),
      g.parent !== null && g.parent !== undefined
        ? h("span", {class: "muted", title: `A MIG slice of GPU ${g.parent}: ask for it as --gres=gpu:${g.type}:1`}, " slice")
        : null,
      h("span", {class: "muted"}, ` ${g.type || "GPU"} · ${fmtMB(g.mem_mb)}`)),
    shared ? sharedList(shared) : h("p", {class: "gpu-holder"}, busy
      ? [h("span", {"aria-hidden": "true"}, "● "), "held by ",
        h("a", {href: `/jobs/${g.job_id}`}, `#${g.job_id}${g.job_name ? " " + g.job_name : ""}`),
        g.user ? h("span", {class: "muted"}, ` (${g.user})`) : null]
      : [h("span", {"aria-hidden": "true"}, "○ "), drained || outside.length ? "idle" : "free"]),
    outside.map((p) => h("p", {class: "gpu-outside", "data-testid": "gpu-outside",
      title: `Since ${fmtRelative(p.since)}. A process that is no corral job's; `
        + "no job is placed on this GPU until it ends (unless the node's outside_processes is \"ignore\")."},
      `in use outside corral by ${p.user} (pid ${p.pid}${p.mem_mb === null || p.mem_mb === undefined ? "" : `, ${fmtMB(p.mem_mb)}`})`)),
    (g.nvlink || []).length || (g.features || []).some((f) => f !== "nvlink")
      ? h("p", {class: "gpu-links small", "data-testid": "gpu-links",
        title: "A job asking for several GPUs gets GPUs of one NVLink group where it can; --constraint=nvlink insists."},
        (g.nvlink || []).length ? `NVLink group ${gpuList(g.nvlink)}` : "",
        (g.features || []).filter((f) => f !== "nvlink").flatMap((f) => [" ", h("span", {class: "gpu-feature"}, f)]))
      : null,
    drained
      ? h("p", {class: "gpu-drain", "data-testid": "gpu-drain", title: drainTitle(drained.reason, drained.by, drained.at)},
        h("strong", {}, g.drain_state), `: ${drained.reason}`,
        h("span", {class: "muted"}, ` (${drained.by}, ${fmtRelative(drained.at)})`))
      : null,
    healthLine(g.health),
    h("div", {class: "gpu-meters"},
      h("span", {class: "meter-label"}, "Util"),
      bar(g.utilization === null || g.utilization === undefined ? null : g.utilization / 100,
        g.utilization === null || g.utilization === undefined ? "—" : fmtPct(g.utilization / 100), {label: "Utilization"}),
      h("span", {class: "meter-label"}, "Mem"),
      bar(memFraction, g.memory_used_mb === null || g.memory_used_mb === undefined ? "—"
        : `${fmtMB(g.memory_used_mb)} / ${fmtMB(g.mem_mb)}`, {label: "Memory", warn: memFraction !== null && memFraction > 0.95})),
    g.temperature_c !== null && g.temperature_c !== undefined || g.power_w !== null && g.power_w !== undefined
      ? h("p", {class: "muted small"},
        g.temperature_c !== null && g.temperature_c !== undefined ? `${Math.round(g.temperature_c)} °C` : "",
        g.power_w !== null && g.power_w !== undefined ? ` · ${Math.round(g.power_w)} W` : "")
      : null);
}

// A shared GPU: its jobs, each with its budget and what its processes use of it, then what is budgeted and free.
function sharedList(shared) {
  return h("div", {class: "gpu-shared", "data-testid": "gpu-shared"},
    h("p", {class: "gpu-holder"}, h("span", {"aria-hidden": "true"}, "◐ "),
      `shared by ${shared.jobs.length} job${shared.jobs.length === 1 ? "" : "s"}`),
    h("ul", {class: "shared-jobs"}, shared.jobs.map((j) => h("li", {"data-testid": "shared-job", "data-job-id": j.job_id},
      h("span", {}, h("a", {href: `/jobs/${j.job_id}`}, `#${j.job_ref}${j.job_name ? " " + j.job_name : ""}`),
        h("span", {class: "muted"}, ` (${j.user})${j.shards ? ` · shard:${j.shards}` : ""}`)),
      bar(j.used_mb === null || j.used_mb === undefined ? null : j.used_mb / j.budget_mb,
        `${j.used_mb === null || j.used_mb === undefined ? "—" : fmtMB(j.used_mb)} / ${fmtMB(j.budget_mb)}`,
        {label: `Job ${j.job_ref}'s GPU memory of its budget`, warn: j.used_mb > j.budget_mb})))),
    h("p", {class: "muted small", "data-testid": "shared-budget"},
      `${fmtMB(shared.budgeted_mb)} budgeted`
        + (shared.outside_mb ? ` · ${fmtMB(shared.outside_mb)} outside corral` : "")
        + ` · ${fmtMB(shared.free_mb)} free`));
}

// The node's features (what --constraint names: its GPU types among them) and how its GPUs are linked
// ("NVLink groups 0-3 · 4-7"), with the full matrix (nvidia-smi topo -m's words) on hover; nothing where the
// node knows neither, and no word on links where it does not know them.
function linksLine(n) {
  const groups = [...new Set((n.gpus || []).filter((g) => (g.nvlink || []).length).map((g) => gpuList(g.nvlink)))];
  const features = n.features || [];
  const known = groups.length || (n.links || []).length;
  if (!known && !features.length) return null;
  const names = (n.gpus || []).map((g) => `GPU${g.index}`);
  const matrix = (n.links || []).map((row, i) => `${names[i]}: ${row.join(" ")}`).join("\n");
  return h("p", {class: "node-links muted small", "data-testid": "node-links",
    title: matrix ? `How close each two GPUs are (NV: NVLink; PIX, PXB: PCIe switches; PHB: host bridge; NODE: NUMA node; SYS: across sockets)\n${matrix}` : ""},
    [groups.length ? `NVLink groups ${groups.join(" · ")}` : known ? "No NVLink between GPUs" : "",
     features.length ? `features: ${features.join(", ")}` : ""].filter(Boolean).join(" · "));
}

function gpuList(ids) {
  const runs = [];
  for (const i of ids) {
    const last = runs[runs.length - 1];
    if (last && i === last[last.length - 1] + 1) last.push(i); else runs.push([i]);
  }
  return runs.map((r) => r.length > 1 ? `${r[0]}-${r[r.length - 1]}` : `${r[0]}`).join(",");
}

// What NVML says is wrong with a GPU (a fatal fault drains it: the drain line above says so); nothing when all is well.
function healthLine(health) {
  if (!health) return null;
  const parts = [];
  if (health.lost) parts.push("GPU lost");
  if (health.throttled && health.throttled.length) parts.push(`throttled: ${health.throttled.join(", ")}`);
  if (health.ecc_uncorrected) parts.push(`${health.ecc_uncorrected} uncorrectable ECC errors`);
  const events = health.events || [];
  const last = events.length ? events[events.length - 1] : null;
  if (last) parts.push(`last: ${last.what} (${fmtRelative(last.at)})`);
  if (!parts.length) return null;
  return h("p", {class: "gpu-health small" + (last && last.severity === "fatal" || health.lost ? " bad" : ""),
    "data-testid": "gpu-health", title: events.map((e) => `${e.at} ${e.severity}: ${e.what}`).join("\n")},
    parts.join(" · "));
}

function drainTitle(reason, by, at) {
  return `Drained by ${by || "?"} ${at ? fmtRelative(at) : ""}: ${reason}. No new job is placed here; `
    + "jobs already on it run to their end. `corral resume` gives it back.";
}
