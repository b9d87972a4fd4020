#!/usr/bin/env bash
# Run corral's benchmarks one after another and print a summary table.
#
#   bench/run_all.sh            # full sizes: 10,000 submits, 50 latency samples, 30 CLI calls, 5 passes
#   bench/run_all.sh --quick    # smaller sizes, for a smoke test
#
# Each benchmark starts and stops its own server in a temporary home (127.0.0.1, port 0),
# except schedule_pass, which calls the scheduler in-process.
# Their JSON results land in bench/results/ (ignored by git), or in $RESULTS_DIR.
# Exit status: 0 when all of them ran (a figure missing its floor is reported, not an error).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
python="${PYTHON:-$repo/.venv/bin/python}"
results="${RESULTS_DIR:-$here/results}"
mkdir -p "$results"

throughput_args=()
latency_args=()
cli_args=()
calls_args=()
pass_args=()
ingest_args=()
series_args=()
dashboard_args=()
relay_args=()
if [[ "${1:-}" == "--quick" ]]; then
    ingest_args=(--points 2000000)
    series_args=(--points 1000000 --samples 10)
    throughput_args=(--jobs 2000)
    latency_args=(--samples 10)
    cli_args=(--samples 10 --baseline-samples 5)
    calls_args=(--samples 8)
    pass_args=(--runs 2)
    dashboard_args=(--metrics 5 --points 200000 --jobs 2000 --loads 3)
    relay_args=(--mb 200 --repeats 1)
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--quick]" >&2
    exit 2
fi

status=0
run() {
    local name="$1"; shift
    echo "=== $name ==="
    rm -f "$results/$name.json"
    if ! timeout 900 "$python" "$here/$name.py" --json "$results/$name.json" "$@"; then
        echo "!!! $name failed" >&2
        status=1
    fi
    echo
}

run submit_throughput ${throughput_args[@]+"${throughput_args[@]}"}
run submit_latency ${latency_args[@]+"${latency_args[@]}"}
run cli_submit ${cli_args[@]+"${cli_args[@]}"}
run cli_calls ${calls_args[@]+"${calls_args[@]}"}
run schedule_pass ${pass_args[@]+"${pass_args[@]}"}
run array_submit
run metrics_ingest ${ingest_args[@]+"${ingest_args[@]}"}
run series_read ${series_args[@]+"${series_args[@]}"}
run sdk_log
run monitor_sampler
run log_relay ${relay_args[@]+"${relay_args[@]}"}
run dashboard_load ${dashboard_args[@]+"${dashboard_args[@]}"}

"$python" - "$results" <<'EOF'
import json, os, sys

results = sys.argv[1]

def load(name):
    try:
        with open(os.path.join(results, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

rows = []
t = load("submit_throughput")
if t:
    rows.append(("submit throughput", f"{t['submits_per_s']:.0f} submits/s", f">= {t['floor_submits_per_s']:.0f} submits/s",
                 t["verdict"] + ("" if t["verified"] else " (VERIFY FAILED)"),
                 f"{t['jobs']} jobs, {t['clients']} clients, {t['wall_s']:.2f} s; "
                 f"p50 {t['latency_ms']['p50']:.2f} ms, p99 {t['latency_ms']['p99']:.2f} ms"))
else:
    rows.append(("submit throughput", "-", ">= 2000 submits/s", "FAILED", ""))
l = load("submit_latency")
if l:
    e = l["latency_ms"]
    rows.append(("submit->start latency", f"{e['median']:.1f} ms median", f"<= {l['floor_median_ms']:.0f} ms",
                 l["verdict"], f"p90 {e['p90']:.1f}, max {e['max']:.1f} ms; server start-submit "
                 f"{l['server_start_minus_submit_ms']['median']:.1f} ms; spawn {l['breakdown_ms']['spawn']['median']:.1f} ms"))
else:
    rows.append(("submit->start latency", "-", "<= 50 ms", "FAILED", ""))
c = load("cli_submit")
if c:
    s = c["cli_submit_ms"]
    rows.append(("corral submit (CLI)", f"{s['median']:.1f} ms median", f"<= {c['floor_median_ms']:.0f} ms", c["verdict"],
                 f"p90 {s['p90']:.1f} ms; python start-up {c['python_startup_ms']['median']:.1f} ms, "
                 f"corral --version {c['corral_version_ms']['median']:.1f} ms"))
else:
    rows.append(("corral submit (CLI)", "-", "<= 100 ms", "FAILED", ""))
k = load("cli_calls")
if k:
    real = {r["command"]: r for r in k["real_slurm"]}
    def short(command):
        return command.replace(" ID", "").replace(" --parsable --hold -- true", "").replace(" --parsable -H --wrap true", "")
    detail = ", ".join(f"{short(r['command'])} {r['ratio_median']:.2f}x" for r in k["commands"])
    if real:
        detail += "; real Slurm: " + ", ".join(f"{name.split()[1]} {r['median_ms']:.1f} ms" for name, r in real.items())
    rows.append(("CLI calls vs python -c pass", f"{k['worst']['ratio_median']:.2f}x worst median",
                 f"<= {k['floor_ratio']:.1f}x", k["verdict"], detail))
else:
    rows.append(("CLI calls vs python -c pass", "-", "<= 2.0x", "FAILED", ""))
p = load("schedule_pass")
if p:
    for sc in p["scenarios"]:
        rows.append((f"scheduling pass, {sc['pending']:,} pending", f"{sc['pass_ms']['median']:.1f} ms median",
                     f"<= {sc['floor_ms']:.0f} ms", sc["verdict"],
                     f"prioritize {sc['prioritize_ms']:.1f} ms, schedule {sc['schedule_ms']:.1f} ms; "
                     f"{sc['started']} started, {sc['reservations']} reservations"))
else:
    rows.append(("scheduling pass", "-", "<= 100 ms / 1 s", "FAILED", ""))
a = load("array_submit")
rows.append(("10,000-task array submit", f"{a['submit_ms']['median']:.1f} ms median", "<= 100 ms", a["verdict"],
             f"p90 {a['submit_ms']['p90']:.1f} ms") if a else ("10,000-task array submit", "-", "<= 100 ms", "FAILED", ""))
i = load("metrics_ingest")
if i:
    rows.append(("metric ingest (HTTP -> store)", f"{i['points_per_s']:,.0f} points/s", ">= 1,000,000 points/s", i["verdict"],
                 f"{i['points']:,} points, {i['clients']} clients, {i['database']}; stored {i['stored']:,}"))
else:
    rows.append(("metric ingest", "-", ">= 1,000,000 points/s", "FAILED", ""))
r = load("series_read")
if r:
    rows.append((f"read {r['points']:,} points as {r['max_points']:,}", f"{r['median_ms']:.1f} ms median", "<= 50 ms",
                 r["verdict"], f"p90 {r['p90_ms']:.1f} ms; zoomed to a tenth {r['zoom_median_ms']:.1f} ms"))
else:
    rows.append(("downsampled series read", "-", "<= 50 ms", "FAILED", ""))
k = load("sdk_log")
if k:
    rows.append(("run.log() in the training loop", f"{k['median_us']:.2f} us/call", "<= 5 us", k["verdict"], k.get("detail", "")))
else:
    rows.append(("run.log()", "-", "<= 5 us", "FAILED", ""))
m = load("monitor_sampler")
if m:
    rows.append((f"sampler, {m['jobs']} jobs + {m['gpus']} GPUs", f"{m['percent_of_core_at_10s']:.2f} % of a core",
                 "< 1 % at 10 s", m["verdict"], f"{m['cpu_ms_per_sample']:.1f} ms CPU per sample "
                 f"({m['machine_processes']} processes on the machine); {m['percent_of_core_at_1s']:.2f} % at 1 s"))
else:
    rows.append(("job sampler", "-", "< 1 % at 10 s", "FAILED", ""))
r = load("log_relay")
if r:
    relay = r["figures"]["dd"]["relay"]
    rows.append(("log relay, a job writing fast", f"{r['worst_added_user_s_per_gb']:.2f} s user CPU per GB",
                 f"<= {r['floor_user_s_per_gb']:.2f} s per GB", r["verdict"],
                 f"dd: {sorted(relay['mb_s'])[len(relay['mb_s']) // 2]:.0f} MB/s relayed, "
                 f"{sorted(relay['kernel_s_per_gb'])[len(relay['kernel_s_per_gb']) // 2]:.2f} s kernel CPU per GB"))
else:
    rows.append(("log relay", "-", "<= 0.25 s per GB", "FAILED", ""))
d = load("dashboard_load")
if d:
    rp, qp, v = d["run_page"], d["queue_page"], d["verdicts"]
    checked = "" if d["verified"] else " (VERIFY FAILED)"
    rows.append((f"run page, {d['metrics']} x {d['points_per_metric']:,} points", f"{rp['painted_ms']['median']:.0f} ms median",
                 "<= 1000 ms", v["run_page"] + checked, f"max {rp['painted_ms']['max']:.0f} ms; first chart "
                 f"{rp['first_chart_ms']['median']:.0f} ms; zoom {rp['zoom_ms']['median']:.0f} ms"))
    rows.append((f"queue of {d['jobs']:,} jobs, page turn", f"{qp['turn_ms']['median']:.0f} ms median", "<= 300 ms",
                 v["queue_page_turn"] + checked, f"max {qp['turn_ms']['max']:.0f} ms; first page "
                 f"{qp['first_page_ms']['median']:.0f} ms median ({v['queue_first_page']}, <= 1000 ms)"))
else:
    rows.append(("dashboard load (browser)", "-", "<= 1000 ms / 300 ms", "FAILED", ""))

head = ("benchmark", "measured", "floor", "verdict", "detail")
widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(4)]
print("=== summary ===")
for r in [head] + rows:
    print("  ".join(str(x).ljust(w) for x, w in zip(r[:4], widths)) + "  " + r[4])
EOF
exit $status
