#!/usr/bin/env python3
"""render.py — a small kustomize renderer for kproxy's own manifests (stdlib + PyYAML).

    /usr/bin/python3 deploy/k8s/render.py deploy/k8s/overlays/chaos      # prints the YAML stream

It understands exactly the kustomization features deploy/k8s uses, and refuses any other key so
it cannot silently differ from `kubectl kustomize`:

  resources:   files (multi-document YAML) and directories (nested kustomizations)
  namespace:   set on every namespaced object
  patches:     `- path: file.yaml` strategic-merge patches, target = the patch's kind + name
  patchesStrategicMerge: the older spelling of the same

Strategic merge: maps merge recursively; lists of maps with a known merge key (containers,
initContainers, env, volumes, volumeMounts by name; container ports by containerPort; Service
ports by port) merge item by item; every other list is replaced; a null value deletes the key.
The deploy tests use it to check invariants without kubectl (and compare with kubectl when
it is installed).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Dict, List

import yaml

SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "namespace", "patches", "patchesStrategicMerge"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass"}
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
              "volumes": "name", "volumeMounts": "mountPath", "imagePullSecrets": "name"}


class RenderError(Exception):
    pass


def _merge_key(field: str, items: List[Any]) -> str | None:
    if field in MERGE_KEYS:
        return MERGE_KEYS[field]
    if field == "ports" and items and all(isinstance(i, dict) for i in items):
        return "containerPort" if any("containerPort" in i for i in items) else "port"
    return None


def strategic_merge(target: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            strategic_merge(target[key], value)
        elif isinstance(value, list) and isinstance(target.get(key), list):
            mk = _merge_key(key, target[key] + value)
            if mk is None:
                target[key] = copy.deepcopy(value)
                continue
            merged = target[key]
            for item in value:
                existing = next((t for t in merged if isinstance(t, dict) and t.get(mk) == item.get(mk)), None)
                if existing is None:
                    merged.append(copy.deepcopy(item))
                else:
                    strategic_merge(existing, item)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _load_docs(path: Path) -> List[Dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def render(directory: str | Path) -> List[Dict[str, Any]]:
    """The objects the kustomization in `directory` produces, patches applied."""
    directory = Path(directory)
    kfile = directory / "kustomization.yaml"
    if not kfile.exists():
        raise RenderError(f"{kfile}: not found")
    k = yaml.safe_load(kfile.read_text()) or {}
    unknown = set(k) - SUPPORTED_KEYS
    if unknown:
        raise RenderError(f"{kfile}: render.py does not support {sorted(unknown)}; use kubectl kustomize")
    docs: List[Dict[str, Any]] = []
    for res in k.get("resources", []):
        p = (directory / res).resolve()
        docs.extend(render(p) if p.is_dir() else _load_docs(p))
    patch_paths = [p["path"] if isinstance(p, dict) else p for p in k.get("patches", [])]
    for p in k.get("patches", []):
        if isinstance(p, dict) and set(p) - {"path"}:
            raise RenderError(f"{kfile}: only `- path:` patches are supported, got {p}")
    patch_paths += list(k.get("patchesStrategicMerge", []))
    for rel in patch_paths:
        for patch in _load_docs(directory / rel):
            kind, name = patch.get("kind"), (patch.get("metadata") or {}).get("name")
            targets = [d for d in docs if d.get("kind") == kind and d["metadata"].get("name") == name]
            if len(targets) != 1:
                raise RenderError(f"{directory / rel}: patch for {kind}/{name} matches {len(targets)} objects")
            strategic_merge(targets[0], patch)
    ns = k.get("namespace")
    if ns:
        for d in docs:
            if d.get("kind") not in CLUSTER_SCOPED:
                d.setdefault("metadata", {})["namespace"] = ns
    return docs


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        docs = render(argv[1])
    except RenderError as e:
        print(f"render.py: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
