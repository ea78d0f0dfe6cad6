# The fields of verl's config dataclasses, read from source with `ast` (verl is never imported).
# Standard library only, Python 3.6+ syntax. Used two ways: as a module by tools/gen_verl_config.py
# (over a wheel's files) and by the target script verl_compose (over the installed verl), so the
# stored data and the live check read the release's code the same way.
#
# verl turns a config node that names a class in `_target_` into that class through
# hydra.utils.instantiate (verl/utils/config.py omega_conf_to_dataclass), i.e. it calls the
# class with the node's keys as keyword arguments: a key the dataclass lacks is a TypeError
# ("unexpected keyword argument") when the worker starts. Hydra removes its own `_target_`,
# `_recursive_`, `_convert_`, `_partial_` and `_args_` keys before the call.
import ast
import os

HYDRA_KEYS = ("_target_", "_recursive_", "_convert_", "_partial_", "_args_")


def _module_file(read, modname):
    """(relative path, source) of module `modname` through read(rel) -> bytes or None."""
    base = modname.replace(".", "/")
    for rel in (base + ".py", base + "/__init__.py"):
        data = read(rel)
        if data is not None:
            return rel, data.decode("utf-8", "replace")
    return None, None


def _absolute(modname, is_pkg, node):
    """The absolute module named by an ImportFrom node inside `modname`."""
    if not node.level:
        return node.module
    parts = modname.split(".")
    if not is_pkg:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _is_dataclass_decorator(dec):
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Name):
        return target.id == "dataclass"
    if isinstance(target, ast.Attribute):
        return target.attr == "dataclass"
    return False


def _is_classvar(annotation):
    text = ast.dump(annotation)
    return "'ClassVar'" in text or "ClassVar[" in text or "InitVar" in text


class Extractor:
    """Finds classes through a release's own imports and lists their dataclass fields.

    read(rel) -> bytes or None reads a file of the release by its path inside the wheel
    (``verl/workers/config/engine.py``). Never imports anything.
    """

    def __init__(self, read):
        self.read = read
        self._trees = {}

    def _tree(self, modname):
        if modname not in self._trees:
            rel, src = _module_file(self.read, modname)
            tree = None
            if src is not None:
                try:
                    tree = ast.parse(src)
                except SyntaxError:
                    tree = None
            self._trees[modname] = (rel, tree)
        return self._trees[modname]

    def find(self, modname, name, depth=0):
        """(module, relative path, ClassDef) of `name` as seen from `modname`, or None."""
        if depth > 12:
            return None
        rel, tree = self._tree(modname)
        if tree is None:
            return None
        is_pkg = rel.endswith("__init__.py")
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return modname, rel, node
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                src = _absolute(modname, is_pkg, node)
                if not src:
                    continue
                for alias in node.names:
                    if alias.name == "*" or (alias.asname or alias.name) == name:
                        found = self.find(src, name if alias.name == "*" else alias.name, depth + 1)
                        if found is not None:
                            return found
        # `from . import engine` then engine.X is not a bare name; a submodule of a package:
        if is_pkg:
            return self.find(modname + "." + name.split(".")[0], name, depth + 1) if "." in name else None
        return None

    def fields(self, modname, classdef, depth=0):
        """(is_dataclass, [field names]) of a class: fields of its dataclass bases first."""
        if depth > 12:
            return False, []
        own_dc = any(_is_dataclass_decorator(d) for d in classdef.decorator_list)
        out, base_dc = [], False
        for base in classdef.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name is None:
                continue
            found = self.find(modname, name)
            if found is None:
                continue
            bmod, _rel, bdef = found
            dc, names = self.fields(bmod, bdef, depth + 1)
            if dc:
                base_dc = True
                out.extend(n for n in names if n not in out)
        if own_dc:
            for node in classdef.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                        not _is_classvar(node.annotation) and node.target.id not in out:
                    out.append(node.target.id)
        return own_dc or base_dc, out

    def target(self, path):
        """{"file", "fields"} for a `_target_` value such as verl.workers.config.FSDPEngineConfig;
        fields is None when the class is not a dataclass; None when it cannot be found."""
        if "." not in path:
            return None
        modname, name = path.rsplit(".", 1)
        found = self.find(modname, name)
        if found is None:
            return None
        mod, rel, node = found
        dc, names = self.fields(mod, node)
        return {"file": rel, "fields": names if dc else None}


def targets_in(tree, out=None):
    """Every `_target_` string found in a plain config tree (dicts and lists)."""
    out = set() if out is None else out
    if isinstance(tree, dict):
        t = tree.get("_target_")
        if isinstance(t, str):
            out.add(t)
        for v in tree.values():
            targets_in(v, out)
    elif isinstance(tree, list):
        for v in tree:
            targets_in(v, out)
    return out


def dir_reader(root):
    """read(rel) over a directory that holds the `verl` package (its parent directory)."""
    def read(rel):
        path = os.path.join(root, *rel.split("/"))
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except (OSError, IOError):
            return None
    return read


#: The functions through which verl turns a config node into its `_target_` class.
BUILDERS = ("omega_conf_to_dataclass",)


def _chain(node):
    """The attribute names below the object holding a config: `self.config.actor.fsdp_config` ->
    ["actor", "fsdp_config"] (self's attribute holds it), `config.actor_rollout_ref.actor` ->
    ["actor_rollout_ref", "actor"] (the name holds it), `config.get("profiler", {})` -> ["profiler"];
    None for the holder itself (a parameter: which node it holds is not visible here)."""
    names = []
    while True:
        if isinstance(node, ast.Attribute):
            names.insert(0, node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant if hasattr(ast, "Constant") else ast.Str):
            key = getattr(node.args[0], "value", getattr(node.args[0], "s", None))
            if not isinstance(key, str):
                return None
            names.insert(0, key)
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Name) and node.id == "self" and names:
        names = names[1:]  # self.config...: the attribute holding the config
    return names or None


def built(read, names):
    """What the release's code turns into dataclasses: {"paths": config-path suffixes it passes to
    omega_conf_to_dataclass (`self.config.actor.fsdp_config` -> "actor.fsdp_config", the name
    holding the config dropped), "classes": the class names given as its dataclass_type}, read
    with `ast` over the package's modules `names` (relative paths under the package's parent).
    A `_target_` node neither reaches is never built by that release, so its fields bind nothing."""
    paths, classes = set(), set()
    for rel in sorted(names):
        data = read(rel)
        if data is None:
            continue
        try:
            tree = ast.parse(data.decode("utf-8", "replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if name not in BUILDERS:
                continue
            for kw in node.keywords:
                if kw.arg == "dataclass_type":
                    cls = kw.value.attr if isinstance(kw.value, ast.Attribute) else getattr(kw.value, "id", None)
                    if cls:
                        classes.add(cls)
            chain = _chain(node.args[0]) if node.args else None
            if chain:
                paths.add(".".join(chain))
    return {"paths": sorted(paths), "classes": sorted(classes)}


def package_modules(root):
    """Relative paths (``verl/...py``) of every module of the `verl` package under ``root``."""
    out = []
    for d, _dirs, files in os.walk(os.path.join(root, "verl")):
        out += [os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/") for f in files if f.endswith(".py")]
    return out


def extract(read, targets):
    """{target: {"file", "fields"} or None} for each `_target_` path, sorted."""
    ex = Extractor(read)
    return dict((t, ex.target(t)) for t in sorted(targets) if t.startswith("verl."))


def main():
    """Target-script entry: ARGS {"targets": [...]}; emits "fields" {verl_root, fields} for the
    installed verl, or "no_verl"."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        emit("no_verl")  # noqa: F821 (the prelude defines emit and ARGS)
        return
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    read = dir_reader(root)
    emit("fields", verl_root=root, fields=extract(read, ARGS.get("targets") or []),  # noqa: F821
         built=built(read, package_modules(root)))


if __name__ == "__main__":
    main()
