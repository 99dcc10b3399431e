#!/usr/bin/env bash
# Informer initial sync and memory on many pods: Fulcrum's C++ informer
# against a client-go shared informer, on the same objects in the same run.
#
#   bench/kube/run_informer_bench.sh [--build-dir DIR] [--count N] [--rounds R]
#
# Starts a test cluster, creates N pods (default 10000) bound to kwok nodes,
# waits for them to run, then runs each client R times (default 3),
# alternating, each in a fresh process. Prints one JSON document with every
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
cpp_bench="$build_dir/bench/kube/kube_informer_bench"
[[ -x $cpp_bench ]] || { echo "build it first: ninja -C $build_dir kube_informer_bench" >&2; exit 2; }
go_bench="$build_dir/bench/kube/clientgo-informer-bench"
(cd "$root/bench/kube/clientgo" && GOTOOLCHAIN=local go build -o "$go_bench" .) >&2

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
  echo "round $round: ${runs[-2]} ${runs[-1]}" >&2
done

python3 - "$populate" "${runs[@]}" <<'PY'
import json, statistics, sys
populate = json.loads(sys.argv[1])
runs = [json.loads(r) for r in sys.argv[2:]]
def summary(prefix):
    mine = [r for r in runs if r["client"].startswith(prefix)]
    return {
        "runs": mine,
        "median_sync_seconds": statistics.median(r["sync_seconds"] for r in mine),
        "median_rss_mib": statistics.median(r["rss_kib"] for r in mine) / 1024,
        "median_peak_rss_mib": statistics.median(r["peak_rss_kib"] for r in mine) / 1024,
    }
fulcrum, clientgo = summary("fulcrum"), summary("client-go")
print(json.dumps({
    "benchmark": "informer initial sync on pods",
    "pods": populate,
    "fulcrum": fulcrum,
    "client_go": clientgo,
    "rss_ratio_fulcrum_over_client_go": fulcrum["median_rss_mib"] / clientgo["median_rss_mib"],
    "sync_ratio_fulcrum_over_client_go": fulcrum["median_sync_seconds"] / clientgo["median_sync_seconds"],
    "goals": {"rss_ratio_at_most": 0.5, "sync_ratio_at_most": 1.0},
}, indent=2))
PY
