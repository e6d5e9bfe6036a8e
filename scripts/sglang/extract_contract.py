"""Extract the facts specserve relies on from SGLang's own code, as JSON.

Runs INSIDE an SGLang venv (stdlib + sglang only):

    .sglang/0.5.21/bin/python scripts/sglang/extract_contract.py \
        --out specserve/upstream/data/sglang-0.5.21.json

`scripts/sglang/regenerate <version>` calls it. The output is deterministic (sorted keys, sorted
lists) so a re-run on the same version gives a byte-identical file; tests/contract/
test_upstream_data.py re-extracts and compares.

What it reads, and how (every fact records the SGLang source file it came from):
- options: the real parser, `argparse.ArgumentParser(prog="sglang serve")` +
  `ServerArgs.add_cli_args` (what `prepare_server_args` builds), walked through `parser._actions`.
  Deprecation is SGLang's own marking: an action class from `srt/arg_groups/argparse_actions.py`
  whose name starts with "Deprecated", or help text that starts with "Deprecated" /
  "(Deprecated" (how the field declarations in `srt/arg_groups/fields/*.py` mark it).
- models: `srt/models/*.py` by AST, never imported (their imports need GPU packages). The served
  classes are the ones a module names in `EntryClass`. The EAGLE-3 drafter rule is the one SGLang's
  runtime relies on: an EAGLE3 draft model is a served class whose `__init__` (own or inherited
  within srt/models) sets `self.capture_aux_hidden_states = True` (the runner reads that attribute,
  `model_executor/runner/eager_runner.py`, to feed the drafter the target's aux hidden states)
  and that defines `get_hot_token_id` (its own draft vocabulary: `speculative/eagle_worker_v2.py`
  `init_token_map` ignores --speculative-token-map for EAGLE3 "models already have this").
  Targets also capture aux states, but only when asked (`set_eagle3_layers_to_capture`), never in
  `__init__`, and have no hot-token map. EAGLE (v2-style) drafters: served classes whose name ends
  in "Eagle" (SGLang's naming for them: llama_eagle.py, qwen2_eagle.py, mistral_eagle.py, ...)
  that are not EAGLE-3 by the rule above. MTP / NextN drafters: served classes whose name ends in
  "NextN" or "MTP" (any case) or that come from a `*_nextn.py` / `*_mtp.py` module.
- metrics: `Gauge/Counter/Histogram/Summary(name="sglang:...")` calls anywhere under srt/, by AST.
  Label names: the string literals in `labelnames`, plus `dynamic_labels: true` when the
  expression also includes a runtime dict (`labels.keys()`); the keys such dicts can carry are
  collected per file from `labels = {...}` literals and `labels["k"] = ...` assignments.
  prometheus_client exposes a Counter as `<name>_total` (it strips a trailing `_total` first),
  a Histogram as `_bucket`/`_sum`/`_count`, a Summary as `_sum`/`_count`: `series` lists those.
- endpoints: route decorators / `add_api_route` in `srt/entrypoints/http_server.py` and the
  routers it includes, and the `/metrics` mount (`srt/utils/common.py`). Auth exemptions: the
  `path.startswith(...)` prefixes and the method in `decide_request_auth` (`srt/utils/auth.py`).
- facts: small things the stand-in and the checks need, each with its source file.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import sglang
from sglang.srt.server_args import ServerArgs

SGLANG_ROOT = Path(sglang.__file__).resolve().parent
SRT = SGLANG_ROOT / "srt"
SCHEMA = 1


def rel(path: Path) -> str:
    return path.resolve().relative_to(SGLANG_ROOT.parent).as_posix()


def parse_module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------

ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def json_safe(value: Any) -> Any:
    """A JSON value for an argparse default/choice; anything else as a stable repr string."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in sorted(value.items(), key=repr)}
    if hasattr(value, "value") and hasattr(value, "name"):  # an Enum member
        return json_safe(value.value)
    return {"repr": ADDRESS.sub("", repr(value))}


ACTION_KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional",
}
DEPRECATED_HELP = re.compile(r"^\(?\s*deprecated\b", re.IGNORECASE)


def build_parser() -> argparse.ArgumentParser:
    # Exactly what prepare_server_args builds (srt/server_args.py).
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def extract_options(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    options = []
    for action in parser._actions:
        cls = type(action).__name__
        if cls == "_HelpAction":
            continue
        help_text = action.help if isinstance(action.help, str) else None
        by_action = cls.startswith("Deprecated")
        by_help = bool(help_text and DEPRECATED_HELP.match(help_text))
        type_name = None
        if action.type is not None:
            type_name = getattr(action.type, "__name__", None) or type(action.type).__name__
        choices = None
        if action.choices is not None:
            choices = json_safe(action.choices)
            if isinstance(action.choices, (set, frozenset)):
                choices = sorted(choices, key=str)
        options.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "takes_value": action.nargs != 0,
                "nargs": action.nargs,
                "choices": choices,
                "default": json_safe(action.default),
                "type_name": type_name,
                "action": ACTION_KINDS.get(cls, cls),
                "required": bool(action.required),
                "deprecated": by_action or by_help,
                "deprecated_by": "action" if by_action else ("help" if by_help else None),
                "new_flag": getattr(action, "new_flag", None),
                "help": help_text,
            }
        )
    options.sort(key=lambda option: option["flags"][0] if option["flags"] else option["dest"])
    return options


# --------------------------------------------------------------------------------------------
# Model registry
# --------------------------------------------------------------------------------------------


def entry_class_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in targets):
            continue
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        names.extend(item.id for item in items if isinstance(item, ast.Name))
    return names


def class_traits(node: ast.ClassDef) -> dict[str, Any]:
    methods = {
        item.name: item
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    captures_in_init = False
    init = methods.get("__init__")
    if init is not None:
        for sub in ast.walk(init):
            if not isinstance(sub, ast.Assign):
                continue
            for target in sub.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "capture_aux_hidden_states"
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and isinstance(sub.value, ast.Constant)
                    and sub.value.value is True
                ):
                    captures_in_init = True
    return {
        "bases": [ast.unparse(base).split(".")[-1] for base in node.bases],
        "captures_aux_in_init": captures_in_init if init is not None else None,
        "has_hot_token_id": "get_hot_token_id" in methods,
    }


# --------------------------------------------------------------------------------------------
# Draft-model class rewrites
# --------------------------------------------------------------------------------------------

_ARCH0 = "self.hf_config.architectures[0]"


def _string_constants(node: ast.AST, module: ast.Module) -> list[str]:
    """The strings an expression names: a literal, a list / tuple / set of them, or a
    module-level name bound to one (MIMO_V2_MODEL_ARCHS)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for item in node.elts for s in _string_constants(item, module)]
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "frozenset" and node.args:
        return _string_constants(node.args[0], module)
    if isinstance(node, ast.Name):
        for stmt in module.body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == node.id):
                return _string_constants(stmt.value, module)
    return []


def _arch_sources(test: ast.expr, module: ast.Module) -> list[str]:
    """The architectures an `if` compares `self.hf_config.architectures[0]` with (== or in)."""
    found: list[str] = []
    for sub in ast.walk(test):
        if (isinstance(sub, ast.Compare) and ast.unparse(sub.left) == _ARCH0
                and isinstance(sub.ops[0], (ast.Eq, ast.In))):
            found += _string_constants(sub.comparators[0], module)
    return found


def _assigned_classes(body: list[ast.stmt], module: ast.Module) -> list[str]:
    """The draft classes a branch writes into architectures (nested branches included)."""
    found: list[str] = []
    for stmt in body:
        for sub in ast.walk(stmt):
            if not isinstance(sub, ast.Assign):
                continue
            for target in sub.targets:
                if ast.unparse(target) in (_ARCH0, "self.hf_config.architectures"):
                    found += _string_constants(sub.value, module)
    return found


def _isinstance_checks(test: ast.expr) -> list[str]:
    """`isinstance(self.hf_text_config, XConfig)` in an `if` test: the config class names."""
    return [sub.args[1].id for sub in ast.walk(test)
            if isinstance(sub, ast.Call) and ast.unparse(sub.func) == "isinstance"
            and len(sub.args) == 2 and isinstance(sub.args[1], ast.Name)]  # fmt: skip


def _called_for_architecture(body: list[ast.stmt]) -> list[str]:
    """`architectures[0] = self.hf_text_config.m()`: the method names."""
    names = []
    for stmt in body:
        for sub in ast.walk(stmt):
            if (isinstance(sub, ast.Assign) and ast.unparse(sub.targets[0]) == _ARCH0
                    and isinstance(sub.value, ast.Call)
                    and isinstance(sub.value.func, ast.Attribute)):
                names.append(sub.value.func.attr)
    return names


def _imported_module(method: ast.FunctionDef, name: str) -> str | None:
    for sub in ast.walk(method):
        if isinstance(sub, ast.ImportFrom) and any(a.name == name for a in sub.names):
            return sub.module
    return None


def _model_type_rewrites(
    test: ast.expr, body: list[ast.stmt], method: ast.FunctionDef
) -> dict[str, list[str]]:
    """`isinstance(self.hf_text_config, XConfig)` -> architectures[0] = hf_text_config.m():
    the config class's `model_type` and the string its method `m` returns (Dots3)."""
    out: dict[str, list[str]] = {}
    for name, call in zip(_isinstance_checks(test), _called_for_architecture(body), strict=False):
        module_name = _imported_module(method, name)
        if module_name is None:
            continue
        tree = parse_module(SGLANG_ROOT.parent / (module_name.replace(".", "/") + ".py"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        model_type: list[str] = []
        returns: list[str] = []
        for node in cls.body:
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "model_type":
                model_type = _string_constants(node.value, tree)
            if isinstance(node, ast.FunctionDef) and node.name == call:
                returns = [r.value.value for r in ast.walk(node) if isinstance(r, ast.Return)
                           and isinstance(r.value, ast.Constant)]  # fmt: skip
        out[model_type[0]] = returns
    return out


def extract_draft_rewrites() -> dict[str, Any]:
    path = SRT / "configs" / "model_config.py"
    module = parse_module(path)
    method = next(n for n in ast.walk(module)
                  if isinstance(n, ast.FunctionDef) and n.name == "_config_draft_model")
    by_arch: dict[str, set[str]] = {}
    by_model_type: dict[str, list[str]] = {}
    for stmt in method.body:
        if not isinstance(stmt, ast.If):
            continue
        targets = _assigned_classes(stmt.body, module)
        for source in _arch_sources(stmt.test, module):
            if targets:
                by_arch.setdefault(source, set()).update(targets)
        by_model_type.update(_model_type_rewrites(stmt.test, stmt.body, method))
    return {
        "by_architecture": {k: sorted(v) for k, v in sorted(by_arch.items())},
        "by_model_type": dict(sorted(by_model_type.items())),
        "source": rel(path),
        "rule": (
            "ModelConfig._config_draft_model, by AST: each top-level `if` that compares "
            "hf_config.architectures[0] with a class name (== / in, literals or a module-level "
            "tuple) and writes class names into architectures (nested branches too: the "
            "algorithm picks among them); `isinstance(hf_text_config, XConfig)` branches by "
            "XConfig.model_type and the name its method returns"
        ),
    }


def extract_models() -> dict[str, Any]:
    classes: dict[str, dict[str, Any]] = {}  # name -> traits (first definition wins per module)
    served: list[tuple[str, str]] = []  # (class, module file)
    for path in sorted((SRT / "models").glob("*.py")):
        tree = parse_module(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(f"{path.name}:{node.name}", class_traits(node))
                classes.setdefault(node.name, classes[f"{path.name}:{node.name}"])
        served.extend((name, rel(path)) for name in entry_class_names(tree))

    def resolve(name: str, module: str, trait: str, seen: frozenset[str] = frozenset()) -> bool:
        # Own definition in the module first, then the same name anywhere in srt/models, then
        # its bases: `__init__` and methods are inherited.
        traits = classes.get(f"{Path(module).name}:{name}") or classes.get(name)
        if traits is None or name in seen:
            return False
        own = traits[trait]
        if own is not None and own is not False:
            return bool(own)
        if trait == "captures_aux_in_init" and own is False:
            return False  # an own __init__ that does not set it
        return any(resolve(base, module, trait, seen | {name}) for base in traits["bases"])

    eagle3, eagle, mtp, dflash, dspark = [], [], [], [], []
    for name, module in sorted(set(served)):
        record = {"architecture": name, "module": module}
        if resolve(name, module, "captures_aux_in_init") and resolve(
            name, module, "has_hot_token_id"
        ):
            eagle3.append(record)
        elif name.endswith("Eagle"):
            eagle.append(record)
        elif re.search(r"(nextn|mtp)$", name, re.IGNORECASE) or re.search(
            r"_(nextn|mtp)\.py$", module
        ):
            mtp.append(record)
        elif re.search(r"(^|/|_)dflash(_[a-z0-9]+)?\.py$", module):
            dflash.append(record)
        elif re.search(r"(^|/|_)dspark(_[a-z0-9]+)?\.py$", module):
            dspark.append(record)
    return {
        "dflash_drafters": dflash,
        "dspark_drafters": dspark,
        "eagle3_drafters": eagle3,
        "eagle_drafters": eagle,
        "mtp_drafters": mtp,
        "served_architectures": sorted({name for name, _ in served}),
        "rule": (
            "EAGLE-3: EntryClass class whose __init__ (own or inherited within srt/models) sets "
            "self.capture_aux_hidden_states = True and that defines get_hot_token_id; EAGLE: "
            "EntryClass name ending in 'Eagle', not EAGLE-3; MTP/NextN: name ending in "
            "NextN/MTP or module *_nextn.py/*_mtp.py; DFLASH / DSPARK (block drafters): the other "
            "EntryClass classes of a module dflash.py / dspark.py, <model>_dflash.py / "
            "<model>_dspark.py or dflash_<x>.py / dspark_<x>.py"
        ),
    }


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------

METRIC_TYPES = {"Gauge", "Counter", "Histogram", "Summary"}


def literal_strings(node: ast.AST) -> tuple[list[str], bool]:
    """String literals in a labelnames expression, and whether it also has a runtime part."""
    found: list[str] = []
    dynamic = False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value], False
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for item in node.elts:
            inner = item.value if isinstance(item, ast.Starred) else item
            names, dyn = literal_strings(inner)
            found += names
            dynamic |= dyn
        return found, dynamic
    if isinstance(node, ast.BinOp):
        left, dyn_left = literal_strings(node.left)
        right, dyn_right = literal_strings(node.right)
        return left + right, dyn_left or dyn_right
    return [], True  # labels.keys(), list(labels.keys()), a variable: known only at run time


def exposed_series(name: str, kind: str) -> list[str]:
    # prometheus_client: Counter strips a trailing _total and exposes <base>_total (+ _created);
    # Histogram: _bucket/_sum/_count (+ _created); Summary: _sum/_count (+ _created); Gauge: name.
    if kind == "Counter":
        base = name[: -len("_total")] if name.endswith("_total") else name
        return [f"{base}_total"]
    if kind == "Histogram":
        return [f"{name}_bucket", f"{name}_count", f"{name}_sum"]
    if kind == "Summary":
        return [f"{name}_count", f"{name}_sum"]
    return [name]


def base_label_keys(tree: ast.Module) -> list[str]:
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                target_name = ast.unparse(target)
                if target_name in ("labels", "self.labels") and isinstance(node.value, ast.Dict):
                    keys |= {
                        k.value
                        for k in node.value.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    }
                if (
                    isinstance(target, ast.Subscript)
                    and ast.unparse(target.value) in ("labels", "self.labels")
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    keys.add(target.slice.value)
    return sorted(keys)


def extract_metrics() -> dict[str, Any]:
    metrics: dict[str, dict[str, Any]] = {}
    for path in sorted(SRT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "sglang:" not in text:
            continue
        tree = ast.parse(text, filename=str(path))
        file_keys: list[str] | None = None
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            kind = ast.unparse(node.func).split(".")[-1].lstrip("_")
            kind = kind.replace("Prom", "")
            if kind not in METRIC_TYPES:
                continue
            kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            name_node = kwargs.get("name") or (node.args[0] if node.args else None)
            if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)):
                continue
            name = name_node.value
            if not name.startswith("sglang:"):
                continue
            labels, dynamic = [], False
            label_node = kwargs.get("labelnames") or (node.args[2] if len(node.args) > 2 else None)
            if label_node is not None:
                labels, dynamic = literal_strings(label_node)
            if file_keys is None:
                file_keys = base_label_keys(tree)
            entry = metrics.setdefault(
                name,
                {
                    "type": kind,
                    "labels": set(),
                    "dynamic_labels": False,
                    "sources": set(),
                    "dynamic_label_keys": set(),
                },
            )
            if entry["type"] != kind:
                entry["type"] = f"{entry['type']}|{kind}"
            entry["labels"] |= set(labels)
            entry["dynamic_labels"] |= dynamic
            entry["sources"].add(rel(path))
            if dynamic:
                entry["dynamic_label_keys"] |= set(file_keys)
    result = {}
    for name, entry in sorted(metrics.items()):
        kinds = entry["type"].split("|")
        result[name] = {
            "type": entry["type"],
            "labels": sorted(entry["labels"]),
            "dynamic_labels": entry["dynamic_labels"],
            "dynamic_label_keys": sorted(entry["dynamic_label_keys"]),
            "series": sorted({s for kind in kinds for s in exposed_series(name, kind)}),
            "sources": sorted(entry["sources"]),
        }
    return result


# --------------------------------------------------------------------------------------------
# HTTP endpoints and auth
# --------------------------------------------------------------------------------------------

ROUTE_METHODS = {"get", "post", "put", "delete", "patch", "head", "options", "websocket"}


def module_file(module: str) -> Path | None:
    candidate = SGLANG_ROOT.parent / Path(*module.split("."))
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if path.is_file():
            return path
    return None


def routes_in(tree: ast.Module, objects: set[str]) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = ast.unparse(node.func.value)
        attr = node.func.attr
        if owner not in objects or not node.args:
            continue
        path_node = node.args[0]
        if not (isinstance(path_node, ast.Constant) and isinstance(path_node.value, str)):
            continue
        kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        if attr in ROUTE_METHODS:
            methods = ["WEBSOCKET"] if attr == "websocket" else [attr.upper()]
        elif attr in ("api_route", "add_api_route"):
            methods_node = kwargs.get("methods")
            methods = ["GET"]
            if isinstance(methods_node, (ast.List, ast.Tuple)):
                methods = [
                    e.value.upper() for e in methods_node.elts if isinstance(e, ast.Constant)
                ]
        else:
            continue
        found.append((path_node.value, methods))
    return found


def extract_endpoints() -> dict[str, Any]:
    server = SRT / "entrypoints" / "http_server.py"
    tree = parse_module(server)
    routes: dict[str, dict[str, set[str]]] = {}

    def add(path: str, methods: list[str], source: Path) -> None:
        entry = routes.setdefault(path, {"methods": set(), "sources": set()})
        entry["methods"] |= set(methods)
        entry["sources"].add(rel(source))

    for path, methods in routes_in(tree, {"app", "app.router"}):
        add(path, methods, server)
    # Routers it includes: `from X import router as name` + `app.include_router(name)`.
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    included = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "app.include_router"
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            included.append(node.args[0].id)
    for local in sorted(set(included)):
        module, name = imported.get(local, (None, None))
        source = module_file(module) if module else None
        if source is None:
            continue
        for path, methods in routes_in(parse_module(source), {name}):
            add(path, methods, source)
    # /metrics is a Starlette Mount added by add_prometheus_middleware (srt/utils/common.py).
    common = SRT / "utils" / "common.py"
    for node in ast.walk(parse_module(common)):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "Mount"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            add(node.args[0].value, ["GET"], common)

    auth = SRT / "utils" / "auth.py"
    prefixes: set[str] = set()
    methods_exempt: set[str] = set()
    for node in ast.walk(parse_module(auth)):
        if isinstance(node, ast.FunctionDef) and node.name == "decide_request_auth":
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Call)
                    and isinstance(sub.func, ast.Attribute)
                    and sub.func.attr == "startswith"
                    and ast.unparse(sub.func.value) == "path"
                ):
                    prefixes |= {a.value for a in sub.args if isinstance(a, ast.Constant)}
                if (
                    isinstance(sub, ast.Compare)
                    and ast.unparse(sub.left) == "method"
                    and isinstance(sub.ops[0], ast.Eq)
                    and isinstance(sub.comparators[0], ast.Constant)
                ):
                    methods_exempt.add(sub.comparators[0].value)
    return {
        "routes": {
            path: {"methods": sorted(e["methods"]), "sources": sorted(e["sources"])}
            for path, e in sorted(routes.items())
        },
        "auth": {
            "exempt_prefixes": sorted(prefixes),
            "exempt_methods": sorted(methods_exempt),
            "match": "path.startswith(prefix)",
            "source": rel(auth),
        },
    }


# --------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------


def function_def(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SystemExit(f"extract_contract: SGLang {sglang.__version__} has no function {name}")


def tree_defaults(path: Path) -> dict[str, Any]:
    """`_auto_choose_speculative_params`: (steps, topk, draft tokens) per target architecture."""
    func = function_def(parse_module(path), "_auto_choose_speculative_params")
    by_arch: dict[str, list[int]] = {}
    by_algorithm: dict[str, list[int]] = {}
    default: list[int] | None = None

    def returned(body: list[ast.stmt]) -> list[int] | None:
        for stmt in body:
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
                return [ast.literal_eval(e) for e in stmt.value.elts]
        return None

    def walk_if(node: ast.If) -> None:
        nonlocal default
        value = returned(node.body)
        test = node.test
        if isinstance(test, ast.Compare) and value is not None:
            left = ast.unparse(test.left)
            right = test.comparators[0]
            if left == "model_arch" and isinstance(test.ops[0], ast.In):
                for arch in ast.literal_eval(right):
                    by_arch.setdefault(arch, value)
            elif left.endswith("speculative_algorithm") and isinstance(test.ops[0], ast.Eq):
                by_algorithm[ast.literal_eval(right)] = value
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            walk_if(node.orelse[0])
        elif node.orelse:
            default = returned(node.orelse)

    for stmt in func.body:
        if isinstance(stmt, ast.If):
            walk_if(stmt)
        elif isinstance(stmt, ast.Return) and default is None:
            default = returned([stmt])
    return {
        "by_architecture": dict(sorted(by_arch.items())),
        "by_algorithm": by_algorithm,
        "default": default,
        "order": [
            "speculative_num_steps",
            "speculative_eagle_topk",
            "speculative_num_draft_tokens",
        ],
        "function": "_auto_choose_speculative_params",
        "source": rel(path),
    }


def max_running_caps(path: Path) -> dict[str, Any]:
    """Handlers that set max_running_requests when it is unset, and the value they set."""
    caps: dict[str, int] = {}
    for node in ast.walk(parse_module(path)):
        if not isinstance(node, ast.FunctionDef):
            continue
        for sub in ast.walk(node):
            if not (
                isinstance(sub, ast.If) and "max_running_requests is None" in ast.unparse(sub.test)
            ):
                continue
            for call in ast.walk(sub):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "declare_resolution":
                    for kw in call.keywords:
                        if kw.arg == "max_running_requests" and isinstance(kw.value, ast.Constant):
                            caps[node.name] = kw.value.value
    return {
        "eagle_family": caps.get("_handle_eagle_family"),
        "by_handler": dict(sorted(caps.items())),
        "source": rel(path),
    }


def readers_of(field: str) -> list[str]:
    """Files under srt/ that read `<something>.field` (attribute loads), not just declare it."""
    files = []
    for path in sorted(SRT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if field not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == field
                and isinstance(node.ctx, ast.Load)
            ):
                files.append(rel(path))
                break
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == field
            ):
                files.append(rel(path))
                break
    return files


def env_default(name: str) -> dict[str, Any]:
    from sglang.srt.environ import Envs

    field = Envs.__dict__[name]
    default = field.default
    return {
        "default": None if callable(default) else json_safe(default),
        "source": rel(SRT / "environ.py"),
    }


def speculative_algorithms() -> dict[str, Any]:
    from sglang.srt.speculative import spec_info

    cls = spec_info.SpeculativeAlgorithm
    builtins = sorted(member.name for member in cls if member.name != "NONE")
    aliases = {}
    for name in sorted(getattr(spec_info, "_RESERVED_ALIASES", ()) or ()):
        aliases[name] = cls.from_string(name).name
    registry = SRT / "speculative" / "spec_registry.py"
    if not aliases and registry.is_file():
        text = registry.read_text(encoding="utf-8")
        match = re.search(r"_RESERVED_ALIASES\s*=\s*frozenset\(\{([^}]*)\}\)", text)
        for name in re.findall(r'"([A-Z0-9_]+)"', match[1] if match else ""):
            aliases[name] = cls.from_string(name).name
    lower_ok = all(cls.from_string(name.lower()).name == name for name in builtins)
    return {
        "builtins": builtins,
        "aliases": aliases,
        "case_insensitive": lower_ok,
        "source": rel(Path(spec_info.__file__)),
        "note": "the CLI flag has no argparse choices; SpeculativeAlgorithm.from_string "
        "upper-cases the name and also accepts names registered by plugins",
    }


def health_facts() -> dict[str, Any]:
    server = SRT / "entrypoints" / "http_server.py"
    text = server.read_text(encoding="utf-8")
    timeout = re.search(
        r'HEALTH_CHECK_TIMEOUT = int\(os\.getenv\("SGLANG_HEALTH_CHECK_TIMEOUT", (\d+)\)\)', text
    )
    shared = bool(re.search(r'@app\.get\("/health"\)\s*\n@app\.get\("/health_generate"\)', text))
    return {
        "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": env_default(
            "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
        ),
        "health_is_health_generate_handler": shared,
        "health_check_timeout_s": int(timeout[1]) if timeout else None,
        "source": rel(server),
    }


def request_spec_details() -> dict[str, Any]:
    """Per-request speculative details: which meta_info keys TokenizerManager.
    _calculate_spec_decoding_metrics writes (AST), under which condition its caller calls it,
    and how the OpenAI routes return them (the request switch and sglext's SpecTokensDetails,
    imported: protocol.py is pydantic only)."""
    manager = SRT / "managers" / "tokenizer_manager.py"
    tree = parse_module(manager)
    method = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "_calculate_spec_decoding_metrics"
    )
    keys = sorted(
        {
            node.slice.value
            for node in ast.walk(method)
            if isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "meta_info"
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)
        }
    )
    text = manager.read_text(encoding="utf-8")
    guarded = bool(
        re.search(
            r"if get_spec\(\)\.speculative_algorithm:\s*\n\s*"
            r"self\._calculate_spec_decoding_metrics\(",
            text,
        )
    )
    from sglang.srt.entrypoints.openai import protocol

    switch = "return_spec_tokens_details"
    routes = {
        route: switch in model.model_fields
        for route, model in (
            ("/v1/completions", protocol.CompletionRequest),
            ("/v1/chat/completions", protocol.ChatCompletionRequest),
        )
    }
    return {
        "meta_info_keys": keys,
        "only_when_speculative_algorithm": guarded,
        "openai_request_switch": switch,
        "openai_routes": routes,
        "openai_response_path": "sglext.spec_tokens_details",
        "openai_fields": sorted(protocol.SpecTokensDetails.model_fields),
        "source": rel(manager),
        "openai_source": rel(SRT / "entrypoints" / "openai" / "protocol.py"),
    }


def extract_facts(options: list[dict[str, Any]]) -> dict[str, Any]:
    by_flag = {flag: option for option in options for flag in option["flags"]}
    hook = SRT / "arg_groups" / "speculative_hook.py"
    backend = by_flag.get("--cuda-graph-backend-decode")
    return {
        "speculative_algorithm": speculative_algorithms(),
        "speculative_tree_defaults": tree_defaults(hook),
        "max_running_requests_cap": max_running_caps(hook),
        "cuda_graph_backend_decode_choices": backend["choices"] if backend else None,
        "num_continuous_decode_steps_readers": readers_of("num_continuous_decode_steps"),
        "health": health_facts(),
        "request_spec_details": request_spec_details(),
    }


def extract() -> dict[str, Any]:
    parser = build_parser()
    options = extract_options(parser)
    return {
        "schema": SCHEMA,
        "sglang_version": sglang.__version__,
        "parser": {
            "prog": parser.prog,
            "allow_abbrev": parser.allow_abbrev,
            "source": rel(SRT / "server_args.py"),
        },
        "options": options,
        "models": extract_models(),
        "draft_rewrites": extract_draft_rewrites(),
        "metrics": extract_metrics(),
        "endpoints": extract_endpoints(),
        "facts": extract_facts(options),
    }


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--out", help="file to write (default: stdout)")
    args = cli.parse_args(argv)
    text = json.dumps(extract(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
