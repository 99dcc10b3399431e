//go:build tools

// Package tools pins the commands we build from helm.sh/helm/v3; see scripts/setup.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
