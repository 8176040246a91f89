"""Every string that marks ownership or carries meaning between us and the cluster.

A grep for any label, annotation, prefix or field-manager name should land here first.
"""

from typing import Final

# Annotation namespace SUNK users already write on their Pods (seeds 002/003).
SUNK_DOMAIN: Final = "sunk.coreweave.com"
# Our own namespace for labels/annotations we put on objects we manage.
DOMAIN: Final = "reconciler.sunk.dev"

# Labels on every object we render; the ownership label is how live state is selected.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "sunk-reconciler"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_RELEASE: Final = f"{DOMAIN}/release"
LABEL_NODESET: Final = f"{DOMAIN}/nodeset"

# Annotations on rendered objects.
ANNOTATION_CONFIG_HASH: Final = f"{DOMAIN}/config-hash"
ANNOTATION_SOURCE_REVISION: Final = f"{DOMAIN}/source-revision"
ANNOTATION_DEFAULT_CONTAINER: Final = "kubectl.kubernetes.io/default-container"

# Slurm: every drain we make carries this reason prefix; we only ever resume those.
DRAIN_REASON_PREFIX: Final = "reconciler:"

# Server-side apply field manager.
FIELD_MANAGER: Final = "sunk-reconciler"

# Kubernetes Node labels SUNK users select GPUs by (seeds 000/002/003).
NODE_LABEL_GPU_CLASS: Final = "gpu.nvidia.com/class"
NODE_LABEL_GPU_MODEL: Final = "gpu.nvidia.com/model"
NODE_LABEL_REGION: Final = "topology.kubernetes.io/region"

# Extended resources.
RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"
RESOURCE_SUNK_ACCELERATOR: Final = f"{SUNK_DOMAIN}/accelerator"

# The embedded local stack: the label on Nodes its node agent registers (and owns).
LABEL_LOCAL_NODE: Final = f"{DOMAIN}/local-node"
