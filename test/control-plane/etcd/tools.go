//go:build tools

// Package tools pins etcd's server, a main package, so that go.mod and go.sum hold its modules.
package tools

import _ "go.etcd.io/etcd/server/v3"
