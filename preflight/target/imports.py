# Imports modules (and attributes) one by one in the target interpreter and reports each.
# ARGS: {"items": [{"id", "module", "attr"?, "facts"?}], "discover_missing": bool}
# Events: "start" {id} before each import, "done" {id, ok, ...} after it. If the process dies
# inside an import (segfault, abort, hang), the checker sees a "start" without a "done".
import importlib
import os
import sys
import time
import traceback
import types
import warnings


def _facts_torch(mod):
    out = {"version": getattr(mod, "__version__", None)}
    ver = getattr(mod, "version", None)
    out["cuda"] = getattr(ver, "cuda", None)
    out["hip"] = getattr(ver, "hip", None)
    try:
        out["cxx11abi"] = bool(mod._C._GLIBCXX_USE_CXX11_ABI)
    except Exception:
        out["cxx11abi"] = None
    try:
        out["arch_list"] = list(mod.cuda.get_arch_list()) if out["cuda"] else []
    except Exception as exc:
        out["arch_list_error"] = str(exc)
    return out


def _facts_version(mod):
    return {"version": getattr(mod, "__version__", None)}


FACTS = {"torch": _facts_torch, "version": _facts_version}


def _one(item):
    t0 = time.time()
    res = {"id": item["id"], "module": item["module"], "attr": item.get("attr")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mod = importlib.import_module(item["module"])
            res["file"] = getattr(mod, "__file__", None)
            if item.get("extensions"):
                # the package's core compiled extension: the first of the known names present
                d = os.path.dirname(res["file"] or "")
                files = os.listdir(d) if d else []
                found = [n for n in item["extensions"] if any(f.startswith(n + ".") and f.endswith(".so") for f in files)]
                if not found:
                    raise ImportError("no compiled core extension (%s) in %s" % (", ".join(item["extensions"]), d))
                importlib.import_module("%s.%s" % (item["module"], found[0]))
                res["extensions"] = found[:1]
            if item.get("attr"):
                getattr(mod, item["attr"])
            facts = FACTS.get(item.get("facts") or "")
            if facts:
                res["facts"] = facts(mod)
            res["ok"] = True
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from imports too
            res["ok"] = False
            res["error_type"] = type(exc).__name__
            res["error"] = str(exc)[:2000]
            if isinstance(exc, ImportError):
                res["missing_module"] = getattr(exc, "name", None)
            res["traceback"] = traceback.format_exc()[-3000:]
    res["warnings"] = sorted(set(str(w.message)[:300] for w in caught))[:10]
    res["duration_s"] = round(time.time() - t0, 3)
    return res


class _Anything(object):
    """Stands in for any attribute of a stubbed module: callable, subclassable, indexable."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Anything()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __getitem__(self, key):
        return _Anything()

    def __iter__(self):
        return iter(())


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything


class _StubFinder(object):
    def __init__(self):
        self.names = set()

    def find_module(self, fullname, path=None):  # Python < 3.4 protocol, kept for old targets
        return self if fullname.split(".")[0] in self.names else None

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in self.names:
            return None
        import importlib.machinery as im

        return im.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass

    def load_module(self, fullname):
        m = _StubModule(fullname)
        m.__path__ = []
        sys.modules[fullname] = m
        return m


def _discover(item, first_missing, limit=8):
    # After the real import failed on a missing module, stub it and try again to learn which
    # other modules are missing too. Evidence only: the real import stops at the first.
    finder = _StubFinder()
    saved = dict(sys.modules)
    sys.meta_path.insert(0, finder)
    missing = [first_missing]
    finder.names.add(first_missing.split(".")[0])
    try:
        for _ in range(limit):
            before = set(sys.modules)
            try:
                mod = importlib.import_module(item["module"])
                if item.get("attr"):
                    getattr(mod, item["attr"])
                return missing, None
            except ImportError as exc:
                name = getattr(exc, "name", None)
                for k in set(sys.modules) - before:
                    if k.split(".")[0] not in finder.names:
                        sys.modules.pop(k, None)
                if not name or name.split(".")[0] in finder.names:
                    return missing, str(exc)[:300]
                missing.append(name)
                finder.names.add(name.split(".")[0])
            except BaseException as exc:
                return missing, "%s: %s" % (type(exc).__name__, str(exc)[:300])
        return missing, "stopped after %d missing modules" % limit
    finally:
        sys.meta_path.remove(finder)
        for k in list(sys.modules):
            if k not in saved:
                del sys.modules[k]


def main():
    results = []
    for item in ARGS.get("items", []):
        emit("start", id=item["id"])
        res = _one(item)
        results.append((item, res))
        emit("done", **res)
    if ARGS.get("discover_missing"):
        for item, res in results:
            if not res["ok"] and res.get("error_type") == "ModuleNotFoundError" and res.get("missing_module"):
                missing, stop = _discover(item, res["missing_module"])
                emit("missing", id=item["id"], modules=missing, stopped=stop)
    sys.stdout.flush()
    # Skip interpreter teardown: some extensions crash in their atexit hooks, which is not
    # what this probe is about.
    os._exit(0)


main()
