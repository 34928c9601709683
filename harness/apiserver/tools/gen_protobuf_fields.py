#!/usr/bin/env python3
"""Generate `src/protobuf/fields.txt`, the field table of the Kubernetes protobuf
messages that the API server decodes (request bodies sent as
`application/vnd.kubernetes.protobuf`, as kubectl's typed commands and the
upstream Cluster Autoscaler do).

Inputs are two crates from crates.io, as cargo unpacks them in its registry:
  * k8s-pb      (prost structs: field numbers, wire types, message types)
  * k8s-openapi (serde code: the JSON name of every field)

Usage: python3 tools/gen_protobuf_fields.py [REGISTRY_SRC_DIR] > src/protobuf/fields.txt
(The default registry directory is the first ~/.cargo/registry/src/* that holds
both crates. `cargo fetch` of a crate that depends on k8s-pb 0.9 unpacks it.)

Output, one message per block:
    message api.core.v1.Volume
    1 name optional string
    2 - inline api.core.v1.VolumeSource
    5 labels map string string
    3 containers repeated message api.core.v1.Container
A field whose JSON name is "-" is inlined into its parent's JSON object
(Go's `json:",inline"`).
"""
import glob
import os
import re
import sys

# The packages whose kinds a client may write, in every version k8s-pb knows
# (kube-apiserver 1.30-1.35 accepts older versions too: policy/v1beta1
# Eviction, autoscaling/v2 HPA, resource.k8s.io/v1beta1, ...), plus the
# apimachinery types they use. Left out: admission and imagepolicy reviews
# (sent by the API server, not to it) and discovery documents.
SKIPPED_GROUPS = {"admission", "imagepolicy", "apidiscovery"}
EXTRA_PACKAGES = [
    "apiextensions_apiserver/pkg/apis/apiextensions/v1",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1beta1",
    "kube_aggregator/pkg/apis/apiregistration/v1",
    "kube_aggregator/pkg/apis/apiregistration/v1beta1",
    "apimachinery/pkg/apis/meta/v1", "apimachinery/pkg/runtime",
    "apimachinery/pkg/util/intstr", "apimachinery/pkg/api/resource",
]


def packages(pb_src):
    found = []
    for mod in sorted(glob.glob(os.path.join(pb_src, "api", "*", "*", "mod.rs"))):
        group = mod.split(os.sep)[-3]
        if group not in SKIPPED_GROUPS:
            found.append("/".join(mod.split(os.sep)[-4:-1]))
    return found + EXTRA_PACKAGES


FIELD_ATTR = re.compile(r'#\[prost\((?P<kind>[a-z_0-9]+)(?: = "(?P<kindarg>[^"]*)")?(?:, (?P<label>optional|repeated))?(?:, [a-z_]+ = "[^"]*")*?, tag = "(?P<tag>\d+)"\)\]')
FIELD_DECL = re.compile(r'pub (?:r#)?(?P<name>[a-z_0-9]+): ?(?P<ty>.+),$')
STRUCT = re.compile(r'pub struct (?P<name>\w+) \{')


def norm(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def resolve(ty, module):
    """Resolve a prost Rust type (Option<T>, Vec<T>, BTreeMap<K, T>) to the
    dotted message name of T."""
    inner = ty.replace(" ", "").rstrip(",")
    while "<" in inner:
        inner = inner[inner.index("<") + 1: inner.rindex(">")]
    inner = [p for p in inner.split(",") if p][-1]
    parts = inner.split("::")
    if len(parts) == 1:
        return ".".join(module + parts)
    path = list(module)
    while parts and parts[0] == "super":
        path.pop()
        parts.pop(0)
    return ".".join(path + parts)


def prost_messages(src, pkgs):
    out = {}
    for pkg in pkgs:
        module = pkg.split("/")
        text = open(os.path.join(src, pkg, "mod.rs")).read().splitlines()
        current, pending, decl = None, None, ""
        for line in text:
            line = line.strip()
            if pending and (decl or line.startswith("pub ")):
                decl += line
                if not decl.endswith(",") or decl.count("<") != decl.count(">"):
                    continue
                line, decl = decl, ""
            s = STRUCT.match(line)
            if s:
                current = ".".join(module + [s.group("name")])
                out[current] = []
                continue
            a = FIELD_ATTR.match(line)
            if a:
                pending = a
                continue
            d = FIELD_DECL.match(line)
            if d and pending and current:
                kind, label = pending.group("kind"), pending.group("label") or "optional"
                field = {"tag": int(pending.group("tag")), "name": d.group("name")}
                if kind == "btree_map":
                    k, v = [x.strip() for x in pending.group("kindarg").split(",")]
                    field["label"] = "map"
                    field["key"] = k
                    field["value"] = resolve(d.group("ty"), module) if v == "message" else v
                else:
                    field["label"] = label
                    field["kind"] = kind
                    if kind == "message":
                        field["message"] = resolve(d.group("ty"), module)
                out[current].append(field)
                pending = None
    return out


def version_rank(version):
    """Orders API versions as Kubernetes does: v1alpha1 < v1beta1 < v1 < v2."""
    m = re.match(r"v(\d+)(alpha|beta)?(\d*)", version)
    if not m:
        return (0, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (int(m.group(1)), stage, int(m.group(3) or 0))


def openapi_names(src, pkgs):
    """Map 'api.core.v1.pod' (lowercased struct name) to its JSON field names,
    from every Kubernetes version k8s-openapi carries (the newest wins)."""
    names = {}
    for api in sorted(glob.glob(os.path.join(src, "v1_*")), key=lambda d: int(d.rsplit("_", 1)[1])):
        for pkg in pkgs:
            for path in glob.glob(os.path.join(api, pkg, "*.rs")):
                text = open(path).read()
                structs = STRUCT.findall(text)
                if not structs:
                    continue
                keys = re.findall(r'"([^"]+)" => Field::Key_', text)
                names[".".join(pkg.split("/") + [structs[0].lower()])] = keys
    return names


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else None
    if base is None:
        for cand in glob.glob(os.path.expanduser("~/.cargo/registry/src/*")):
            if glob.glob(cand + "/k8s-pb-0.9.*") and glob.glob(cand + "/k8s-openapi-0.29.*"):
                base = cand
    pb = glob.glob(base + "/k8s-pb-0.9.*/src")[0]
    oa = glob.glob(base + "/k8s-openapi-0.29.*/src")[0]
    pkgs = packages(pb)
    messages = prost_messages(pb, pkgs)
    json = openapi_names(oa, pkgs)
    # Every JSON name k8s-openapi spells, by its normalised form: the names of
    # messages with no k8s-openapi struct (kinds no longer served, such as
    # policy/v1beta1) follow the same spelling (podIP, not podIp).
    spelling = {norm(k): k for keys in json.values() for k in keys if k[:1].isalpha()}

    def own_fields(msg):
        pkg, _, name = msg.rpartition(".")
        return json.get(pkg + "." + name.lower())

    def sibling(msg):
        """The same struct in another version of its group (policy/v1beta1
        Eviction is policy/v1 Eviction), the most stable version first."""
        pkg, _, name = msg.rpartition(".")
        group = pkg.rpartition(".")[0]
        found = [m for m in messages if m != msg and own_fields(m) is not None
                 and m.rpartition(".")[2] == name
                 and m.rpartition(".")[0].rpartition(".")[0] == group]
        found.sort(key=lambda m: version_rank(m.split(".")[-2]), reverse=True)
        return found[0] if found else None

    def json_name(keys, f):
        for k in keys:
            if norm(k) == norm(f["name"]):
                return k
        return None

    def inlined(keys, f):
        # A message field with no JSON name is Go's `json:",inline"`
        # (Volume.volumeSource, Probe.handler, ...): its fields are the
        # parent's. Go names such a field after its type (volumeSource,
        # handler for ProbeHandler); any other missing name is a field that
        # k8s-openapi leaves out (alpha), not an inlined one.
        if json_name(keys, f) is not None or f.get("kind") != "message" or f["label"] != "optional":
            return False
        return norm(f["message"].rpartition(".")[2]).endswith(norm(f["name"]))

    print("# Generated by tools/gen_protobuf_fields.py from the k8s-pb 0.9 and")
    print("# k8s-openapi 0.29 crates (Apache-2.0). Do not edit by hand.")
    for msg in sorted(messages):
        fields = messages[msg]
        own = own_fields(msg)
        sib = sibling(msg) if own is None else None
        sib_fields = {f["name"]: f for f in messages[sib]} if sib else {}
        print(f"message {msg}")
        for f in fields:
            name = None
            if own is not None:
                name = json_name(own, f)
                if name is None and inlined(own, f):
                    print(f'{f["tag"]} - inline {f["message"]}')
                    continue
                if name is None:
                    print(f"warning: {msg}.{f['name']} has no JSON name", file=sys.stderr)
            elif sib is not None:
                keys = own_fields(sib)
                name = json_name(keys, f)
                twin = sib_fields.get(f["name"])
                if name is None and twin is not None and inlined(keys, twin):
                    print(f'{f["tag"]} - inline {f["message"]}')
                    continue
            if name is None:
                name = spelling.get(norm(f["name"]))
            if name is None:
                # No k8s-openapi counterpart (apimachinery internals): lowerCamelCase.
                first, *rest = f["name"].split("_")
                name = first + "".join(p[:1].upper() + p[1:] for p in rest)
            if f["label"] == "map":
                print(f'{f["tag"]} {name} map {f["key"]} {f["value"]}')
            elif f["kind"] == "message":
                print(f'{f["tag"]} {name} {f["label"]} message {f["message"]}')
            else:
                print(f'{f["tag"]} {name} {f["label"]} {f["kind"]}')


if __name__ == "__main__":
    main()
