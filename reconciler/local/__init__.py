"""The embedded local stack: real Slurm daemons and a real Kubernetes API server on loopback."""

# What installs the stack's Debian packages and builds kube-apiserver (run as root).
SETUP_COMMAND = "bash tools/setup.sh"
