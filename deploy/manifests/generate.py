#!/usr/bin/env python3
"""Writes deploy/manifests/{kwok,clusterapi,aws}.yaml.

The RBAC rules of each manifest are copied, comments and all, from the
chart's rule files, so that the chart and the plain manifests cannot drift:

    ClusterRole: files/clusterrole-rules.yaml ++ files/clusterrole-rules-<provider>.yaml
    Role:        files/role-rules.yaml        ++ files/role-rules-<provider>.yaml

(files/ is deploy/helm/cluster-autoscaler/files/). Run it after changing a
rule file or this script:

    python3 deploy/manifests/generate.py          # rewrite the manifests
    python3 deploy/manifests/generate.py --check  # exit 1 if one is stale

Only the standard library is needed; with PyYAML installed, the result is
also parsed and its rules compared with the files'.
"""

import pathlib
import sys

DEPLOY = pathlib.Path(__file__).resolve().parent.parent
FILES = DEPLOY / "helm" / "cluster-autoscaler" / "files"
OUT = DEPLOY / "manifests"
PROVIDERS = ("kwok", "clusterapi", "aws")


def rule_text(name):
    """The rules of files/<name> as text to indent under `rules:`: the file
    less its first paragraph (the header comment); "" for an empty list."""
    lines = (FILES / name).read_text().splitlines()
    while lines and lines[0].strip():
        lines.pop(0)
    body = "\n".join(lines).strip("\n")
    meaningful = [
        line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    if meaningful == ["[]"]:
        return ""
    if any(line.strip() == "[]" for line in meaningful):
        raise SystemExit(f"{name}: an empty list must be the file's only content")
    return body


def rules(scope, provider):
    parts = []
    for name in (f"{scope}-rules.yaml", f"{scope}-rules-{provider}.yaml"):
        text = rule_text(name)
        parts.append(f"# deploy/helm/cluster-autoscaler/files/{name}")
        if text:
            parts.append(text)
        else:
            parts.append("# (no rules)")
        parts.append("")
    return indent("\n".join(parts).rstrip("\n"))


def indent(text):
    """The text's lines indented under `rules:`, blank lines left empty."""
    return "\n".join(("  " + line) if line.strip() else "" for line in text.splitlines())


HEADER = {
    "kwok": """\
# cluster-autoscaler with the kwok cloud provider (--cloud-provider=kwok), in
# kube-system, for `kubectl apply -f` without Helm. The node groups are fake
# (kwok) nodes described by the provider's ConfigMaps: apply
# deploy/kwok-provider-configmaps.yaml first (the provider does not start
# without them), and run the kwok controller so that the nodes it creates
# become Ready.""",
    "clusterapi": """\
# cluster-autoscaler with the Cluster API provider
# (--cloud-provider=clusterapi), in kube-system, for `kubectl apply -f`
# without Helm, in a cluster that is its own management cluster (the
# Machines are in it). Node groups are the MachineDeployments (and
# MachineSets no MachineDeployment owns) annotated
# cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size;
# deploy/clusterapi-example.yaml has two. With a separate management
# cluster, add --cloud-config=<its kubeconfig> (mounted from a Secret) and
# grant the clusterapi rules below (and events create) there instead.""",
    "aws": """\
# cluster-autoscaler with the aws provider (--cloud-provider=aws), in
# kube-system, for `kubectl apply -f` without Helm. Node groups are EC2 Auto
# Scaling groups, found by tag below: replace my-cluster with your cluster's
# name (and the region). AWS credentials: an IAM role for the service
# account (the annotation below), or the node's instance profile; the
# permissions are listed in deploy/README.md.""",
}

SA_ANNOTATIONS = {
    "kwok": "",
    "clusterapi": "",
    "aws": """\
  # IAM roles for service accounts (EKS): the role with the Auto Scaling and
  # EC2 permissions of deploy/README.md.
  # annotations:
  #   eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/cluster-autoscaler
""",
}

ARGS = {
    "kwok": "",
    "clusterapi": """\
            # Only the node groups of one Cluster (and/or namespace, labels);
            # without it every annotated MachineDeployment is one.
            # - --node-group-auto-discovery=clusterapi:clusterName=my-cluster
""",
    "aws": """\
            - --node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/my-cluster
            # Or static groups, <min>:<max>:<ASG name>, one flag each:
            # - --nodes=1:10:my-asg
""",
}

ENV = {
    "kwok": """\
            # KWOK_PROVIDER_CONFIGMAP (default kwok-provider-config) names
            # the provider's ConfigMap; the Role grants that name.
""",
    "clusterapi": """\
            # CAPI_GROUP (default cluster.x-k8s.io) and CAPI_VERSION (default:
            # the group's preferred version) locate the Cluster API objects;
            # another group needs its own rules in the ClusterRole.
""",
    "aws": """\
            - name: AWS_REGION
              value: us-east-1
""",
}

AFFINITY = {
    "kwok": """\
      # Not on a fake node: kwok would only pretend to run the pod. The
      # templates of deploy/kwok-provider-configmaps.yaml label their nodes
      # kwok-nodegroup.
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: kwok-nodegroup
                    operator: DoesNotExist
""",
    "clusterapi": "",
    "aws": "",
}

TEMPLATE = """\
# GENERATED by deploy/manifests/generate.py: edit that script or the rule
# files in deploy/helm/cluster-autoscaler/files/, then run it.
#
{header}
#
# The image is the one deploy/Dockerfile builds
# (podman build -f deploy/Dockerfile -t cluster-autoscaler:dev ., which
# podman names localhost/cluster-autoscaler:dev): load it into the nodes or
# push it to a registry and change `image:` below.
#
# The RBAC rules are the chart's (deploy/README.md explains each one).
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
{sa_annotations}---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cluster-autoscaler
  labels:
    app.kubernetes.io/name: cluster-autoscaler
rules:
{clusterrole_rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cluster-autoscaler
  labels:
    app.kubernetes.io/name: cluster-autoscaler
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-autoscaler
subjects:
  - kind: ServiceAccount
    name: cluster-autoscaler
    namespace: kube-system
---
# In kube-system, the autoscaler's --namespace: the leader election Lease,
# the status ConfigMap and the priority expander's ConfigMap{role_extra}.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
rules:
{role_rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: cluster-autoscaler
subjects:
  - kind: ServiceAccount
    name: cluster-autoscaler
    namespace: kube-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
spec:
  # More replicas wait on the leader election Lease.
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: cluster-autoscaler
  template:
    metadata:
      labels:
        app.kubernetes.io/name: cluster-autoscaler
    spec:
      serviceAccountName: cluster-autoscaler
      priorityClassName: system-cluster-critical
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
{affinity}      containers:
        - name: cluster-autoscaler
          image: localhost/cluster-autoscaler:dev
          imagePullPolicy: IfNotPresent
          command:
            - /cluster-autoscaler
          args:
            - --cloud-provider={provider}
            # The Lease and the ConfigMaps are in this namespace (the Role).
            - --namespace=kube-system
            - --address=:8085
{args}            - --logtostderr=true
            - --stderrthreshold=info
            - --v=1
          env:
            # The kwok provider reads its ConfigMaps from $POD_NAMESPACE.
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
{env}          ports:
            - name: http
              containerPort: 8085
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /health-check
              port: 8085
          resources:
            requests:
              cpu: 100m
              memory: 300Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            runAsNonRoot: true
            capabilities:
              drop:
                - ALL
---
# /metrics (and /health-check, /decisions) for Prometheus.
apiVersion: v1
kind: Service
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: cluster-autoscaler
  ports:
    - name: http
      port: 8085
      targetPort: 8085
      protocol: TCP
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: cluster-autoscaler
  namespace: kube-system
  labels:
    app.kubernetes.io/name: cluster-autoscaler
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: cluster-autoscaler
"""

ROLE_EXTRA = {
    "kwok": ";\n# the kwok provider's ConfigMaps",
    "clusterapi": "",
    "aws": "",
}


def render(provider):
    return TEMPLATE.format(
        header=HEADER[provider],
        provider=provider,
        sa_annotations=SA_ANNOTATIONS[provider],
        clusterrole_rules=rules("clusterrole", provider),
        role_rules=rules("role", provider),
        role_extra=ROLE_EXTRA[provider],
        args=ARGS[provider],
        env=ENV[provider],
        affinity=AFFINITY[provider],
    )


def verify(provider, text):
    """With PyYAML: the manifest parses and its rules are the files'."""
    try:
        import yaml
    except ImportError:
        return
    docs = [d for d in yaml.safe_load_all(text) if d]

    def file_rules(name):
        return yaml.safe_load((FILES / name).read_text()) or []

    for kind, scope in (("ClusterRole", "clusterrole"), ("Role", "role")):
        (obj,) = [d for d in docs if d["kind"] == kind]
        want = file_rules(f"{scope}-rules.yaml") + file_rules(f"{scope}-rules-{provider}.yaml")
        if obj["rules"] != want:
            raise SystemExit(f"{provider}.yaml: the {kind}'s rules are not the files'")


ADDON = """\
# GENERATED by deploy/manifests/generate.py: edit that script or
# deploy/helm/cluster-autoscaler/files/{file},
# then run it.
#
{about}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: cluster-autoscaler
rules:
{rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: cluster-autoscaler
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {name}
subjects:
  - kind: ServiceAccount
    name: cluster-autoscaler
    namespace: kube-system
"""

# The add-ons: output, rule file, ClusterRole name, what the header says.
ADDONS = [
    (
        "provisioning-requests",
        "clusterrole-rules-provisioningrequests.yaml",
        "cluster-autoscaler-provisioning",
        """# ProvisioningRequests, for any of the manifests: apply this file too, add
# --enable-provisioning-requests to the Deployment's arguments, and install
# upstream's CRD (cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml;
# `testbed up --provisioning-request-crd` installs it). As the FAQ's "RBAC
# permissions", a ClusterRole of its own bound to the autoscaler's
# ServiceAccount; the autoscaler needs it only with the flag.""",
    ),
    (
        "capacity-buffers",
        "clusterrole-rules-capacitybuffers.yaml",
        "cluster-autoscaler-capacity-buffers",
        """# CapacityBuffers, for any of the manifests: apply this file too, add
# --capacity-buffer-controller-enabled and --capacity-buffer-pod-injection-enabled
# to the Deployment's arguments, and install upstream's CRD
# (cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml).
# A ClusterRole of its own bound to the autoscaler's ServiceAccount; the
# autoscaler needs it only with the flags.""",
    ),
    (
        "capacity-quotas",
        "clusterrole-rules-capacityquotas.yaml",
        "cluster-autoscaler-capacity-quotas",
        """# CapacityQuotas, for any of the manifests: apply this file too, add
# --capacity-quotas-enabled to the Deployment's arguments, and install
# upstream's CRD (cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacityquotas.yaml).
# A ClusterRole of its own bound to the autoscaler's ServiceAccount; the
# autoscaler needs it only with the flag.""",
    ),
]


def render_addon(file, name, about):
    body = indent(f"# deploy/helm/cluster-autoscaler/files/{file}\n" + rule_text(file))
    return ADDON.format(file=file, name=name, about=about, rules=body)


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    outputs = [(p, render(p)) for p in PROVIDERS]
    for provider, text in outputs:
        verify(provider, text)
    for output, file, name, about in ADDONS:
        outputs.append((output, render_addon(file, name, about)))
    for provider, text in outputs:
        path = OUT / f"{provider}.yaml"
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
    if stale:
        print("stale (run python3 deploy/manifests/generate.py):", *stale, sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    main()
