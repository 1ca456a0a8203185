//go:build tools

// Package tools pins the commands scripts/control-plane.sh builds, so that go.mod and go.sum hold
// every module they need.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
