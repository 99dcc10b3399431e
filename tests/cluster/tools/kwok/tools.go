//go:build tools

// Package tools pins the commands we build from sigs.k8s.io/kwok; see scripts/setup.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
