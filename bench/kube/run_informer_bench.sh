#!/usr/bin/env bash
# Informer initial sync and memory on many pods: Fulcrum's C++ informer
# against a client-go shared informer, on the same objects in the same run.
#
#   bench/kube/run_informer_bench.sh [--build-dir DIR] [--count N] [--rounds R]
#
# Starts a test cluster, creates N pods (default 10000) bound to kwok nodes,
# waits for them to run, then runs each client R times (default 3),
# alternating, each in a fresh process. client-go runs twice per round: with
# its default protobuf encoding, and with JSON (--json) as the C++ client uses. Prints one JSON document with every
# run and the medians. Needs kube_informer_bench built in DIR
# (default build-kube) and Go (GOTOOLCHAIN=local) for the baseline.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="$root/build-kube"
count=10000
rounds=3
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?}; shift 2 ;;
    --count) count=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
done
build_dir="$(cd "$build_dir" && pwd)"  # the Go build below runs in another directory
cpp_bench="$build_dir/bench/kube/kube_informer_bench"
[[ -x $cpp_bench ]] || { echo "build it first: ninja -C $build_dir kube_informer_bench" >&2; exit 2; }
go_bench="$build_dir/bench/kube/clientgo-informer-bench"
# -trimpath, as scripts/setup builds Kubernetes: this module pins the same versions of client-go and
# every dependency, so with the same flags all 702 packages it imports come from the Go build
# cache that setup filled, and only this program is compiled and linked (docs/development.md).
(cd "$root/bench/kube/clientgo" && GOTOOLCHAIN=local go build -trimpath -o "$go_bench" .) >&2

dir="$(mktemp -d /tmp/fulcrum-kube-bench-XXXXXX)"
"$root/tests/cluster/up" --dir "$dir" >&2
trap '"$root/tests/cluster/down" --dir "$dir" >&2; rm -rf "$dir"' EXIT
kubeconfig="$dir/admin.kubeconfig"

populate="$(FULCRUM_LOG_LEVEL=warning "$cpp_bench" populate --kubeconfig "$kubeconfig" --namespace bench --count "$count")"
echo "populate: $populate" >&2

runs=()
for ((round = 1; round <= rounds; round++)); do
  runs+=("$(FULCRUM_LOG_LEVEL=warning "$cpp_bench" sync --kubeconfig "$kubeconfig" --namespace bench)")
  runs+=("$("$go_bench" --kubeconfig "$kubeconfig" --namespace bench)")
  runs+=("$("$go_bench" --kubeconfig "$kubeconfig" --namespace bench --json)")
  echo "round $round: ${runs[-3]} ${runs[-2]} ${runs[-1]}" >&2
done

python3 - "$populate" "${runs[@]}" <<'PY'
import json, statistics, sys
populate = json.loads(sys.argv[1])
runs = [json.loads(r) for r in sys.argv[2:]]
def summary(prefix, wire=None):
    mine = [r for r in runs if r["client"].startswith(prefix) and (wire is None or r.get("wire") == wire)]
    return {
        "runs": mine,
        "median_sync_seconds": statistics.median(r["sync_seconds"] for r in mine),
        "median_rss_mib": statistics.median(r["rss_kib"] for r in mine) / 1024,
        "median_peak_rss_mib": statistics.median(r["peak_rss_kib"] for r in mine) / 1024,
    }
fulcrum = summary("fulcrum")
protobuf = summary("client-go", "protobuf (client-go default)")
json_wire = summary("client-go", "json")
def ratios(baseline):
    return {"rss": fulcrum["median_rss_mib"] / baseline["median_rss_mib"],
            "sync": fulcrum["median_sync_seconds"] / baseline["median_sync_seconds"]}
print(json.dumps({
    "benchmark": "informer initial sync on pods",
    "pods": populate,
    "fulcrum": fulcrum,
    "client_go_protobuf": protobuf,
    "client_go_json": json_wire,
    "fulcrum_over_client_go_protobuf": ratios(protobuf),
    "fulcrum_over_client_go_json": ratios(json_wire),
    "goals": {"rss_ratio_at_most": 0.5, "sync_ratio_at_most": 1.0},
}, indent=2))
PY
