// client-go baseline for bench/kube: a shared informer on pods of one
// namespace; prints, as JSON, the wall time from start to HasSynced and the
// process's resident memory, measured the same way as the C++ benchmark.
// client-go asks for protobuf by default; --json makes it use JSON like the
// C++ client, for a comparison of the clients rather than of the encodings.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// statusKiB reads a "Name:   123 kB" line of /proc/self/status.
func statusKiB(name string) int64 {
	file, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, name+":") {
			fields := strings.Fields(line)
			value, _ := strconv.ParseInt(fields[1], 10, 64)
			return value
		}
	}
	return -1
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	namespace := flag.String("namespace", "bench", "namespace of the pods")
	settle := flag.Duration("settle", 2*time.Second, "time to let the watch run after sync before measuring RSS")
	jsonOnly := flag.Bool("json", false, "ask for JSON instead of client-go's default protobuf, as the C++ client does")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The same client-side limits as the C++ run, so neither is throttled differently.
	config.QPS = 200
	config.Burst = 400
	wire := "protobuf (client-go default)"
	if *jsonOnly {
		config.ContentType = "application/json"
		config.AcceptContentTypes = "application/json"
		wire = "json"
	}
	client := kubernetes.NewForConfigOrDie(config)

	start := time.Now()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(*namespace))
	informer := factory.Core().V1().Pods().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	// cache.WaitForCacheSync polls every 100 ms, which would round client-go's time up;
	// poll every millisecond instead, so its sync time is measured as closely as ours.
	for !informer.HasSynced() {
		if time.Since(start) > 10*time.Minute {
			fmt.Fprintln(os.Stderr, "informer did not sync")
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	syncSeconds := time.Since(start).Seconds()
	time.Sleep(*settle)
	result := map[string]any{
		"client":       "client-go v0.34.4 shared informer",
		"wire":         wire,
		"objects":      len(informer.GetStore().ListKeys()),
		"sync_seconds": syncSeconds,
		"rss_kib":      statusKiB("VmRSS"),
		"peak_rss_kib": statusKiB("VmHWM"),
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
	close(stop)
}
