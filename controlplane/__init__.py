"""The local control plane: real upstream Kubernetes binaries built from the Go module proxy.

``building`` compiles kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd
and kwok into a cache outside the checkout; ``pki`` makes the certificates; ``launching``
starts and stops the components on loopback; ``nodes`` describes the fake GPU nodes and the
kwok stages that run pods.
"""
