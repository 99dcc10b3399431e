//go:build tools

// Package tools pins the commands we build from go.etcd.io/etcd/server/v3; see scripts/setup.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
