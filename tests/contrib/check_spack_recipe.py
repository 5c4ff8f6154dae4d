#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks a Spack recipe (contrib/spack/package.py) without Spack.

    check_spack_recipe.py RECIPE (--configure SCRIPT | --m4 CONFIGURE_AC [M4_FILE...])

1. Parses RECIPE (ast) and checks that every global name it reads is defined by the recipe, by Python or by
   the stub of Spack's package API below (a misspelt directive fails here, not only in Spack).
2. Executes the class body against the stub, which records version(), variant(), depends_on(),
   conflicts(), ... and provides with_or_without(), enable_or_disable() and a Spec that answers
   satisfies(), `in`, spec[dep].prefix and spec.variants the way Spack's does for boolean variants.
3. Calls configure_args() for every combination of the boolean variants (conditional variants, `when=`, are
   left out where their condition does not hold; combinations that a conflicts() rules out are skipped)
   and checks each option against what configure accepts: the options `SCRIPT --help` lists, or, with
   --m4, the AC_ARG_WITH/AC_ARG_ENABLE names of configure.ac and its macros.

Prints one line per variant combination with its configure line; fails (exit 1) naming each option that
configure does not accept, each option given a value that configure's --help shows it does not take, and
each recipe error (unknown variant in a condition, a dependency read that the spec does not have).
"""
import argparse
import ast
import builtins
import contextlib
import itertools
import re
import subprocess
import sys
import types

# --------------------------------------------------------------------------------------------------------
# The stub of spack.package: the directives record what the class body declares.


class Directives:
    """What the class body declared, in order."""

    def __init__(self):
        self.versions = []
        self.variants = {}  # name -> dict(default, when, description, values)
        self.depends = []  # (name, when, type)
        self.conflicts = []  # (spec, when, msg)
        self.requires = []  # (specs, when)
        self.when_stack = []

    def cond(self, when):
        parts = [w for w in self.when_stack + [when] if w]
        return " ".join(parts)


DIRECTIVES = Directives()


def version(ver, *args, **kwargs):
    DIRECTIVES.versions.append(ver)


def variant(name, default=None, description="", values=None, multi=None, when=None, sticky=False, **kwargs):
    if values is not None and set(values) != {True, False}:
        raise RecipeError(f"variant {name!r}: the stub supports only boolean variants")
    if not isinstance(default, bool):
        raise RecipeError(f"variant {name!r}: default must be True or False (boolean variant)")
    if name in DIRECTIVES.variants:
        raise RecipeError(f"variant {name!r} declared twice")
    DIRECTIVES.variants[name] = {"default": default, "when": DIRECTIVES.cond(when), "description": description}


def depends_on(spec, when=None, type=None, patches=None):
    name = re.match(r"[A-Za-z0-9_.-]+", spec)
    if not name:
        raise RecipeError(f"depends_on({spec!r}): cannot read the package name")
    DIRECTIVES.depends.append((name.group(0), DIRECTIVES.cond(when), type))


def conflicts(spec, when=None, msg=None):
    DIRECTIVES.conflicts.append((spec, DIRECTIVES.cond(when), msg))


def requires(*specs, when=None, policy="one_of", msg=None):
    DIRECTIVES.requires.append((specs, DIRECTIVES.cond(when)))


def _record_nothing(*args, **kwargs):
    return None


license = maintainers = patch = resource = provides = extends = build_system = _record_nothing


@contextlib.contextmanager
def when(condition):
    DIRECTIVES.when_stack.append(condition)
    try:
        yield
    finally:
        DIRECTIVES.when_stack.pop()


def _decorator_factory(*args, **kwargs):
    return lambda f: f


run_after = run_before = on_package_attributes = _decorator_factory


class Executable:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RecipeError(f"the recipe ran {self.name} while computing configure options")


def which(*names, **kwargs):
    return Executable(names[0])


def _not_in_configure_args(name):
    def f(*args, **kwargs):
        raise RecipeError(f"{name}() called while computing configure options")

    return f


working_dir = filter_file = install = install_tree = mkdirp = make = _not_in_configure_args("a build step")


class RecipeError(Exception):
    pass


# --------------------------------------------------------------------------------------------------------
# Specs: a concrete spec of the recipe with boolean variants and the dependencies their conditions select.

_TOKEN = re.compile(r"\s*(?:([+~])([A-Za-z0-9_][A-Za-z0-9_-]*)|@(\S+)|%(\S+)|\^(\S+)|(\S+))")


def _tokens(cond):
    pos = 0
    out = []
    cond = cond.strip()
    while pos < len(cond):
        m = _TOKEN.match(cond, pos)
        if not m or m.end() == pos:
            raise RecipeError(f"cannot read the condition {cond!r}")
        pos = m.end()
        out.append(m.groups())
    return out


class Prefix(str):
    pass


class Dep:
    def __init__(self, name):
        self.name = name
        self.prefix = Prefix(f"/stub/prefix/{name}")


class VariantValue:
    def __init__(self, value):
        self.value = value


class Spec:
    def __init__(self, name, variants, deps, known):
        self.name = name
        self.variants = {k: VariantValue(v) for k, v in variants.items()}
        self._values = dict(variants)
        self._deps = set(deps)
        self._known = known  # every variant the recipe declares

    def satisfies(self, cond):
        for sign, var, ver, comp, dep, other in _tokens(cond):
            if sign:
                if var not in self._known:
                    raise RecipeError(f"condition {cond!r} names {sign}{var}, which is not a variant of the recipe")
                if var not in self._values or self._values[var] != (sign == "+"):
                    return False
            elif ver is not None:
                # One version (main) in the stub: any version condition of the recipe is taken as met.
                continue
            elif comp is not None:
                continue
            elif dep is not None:
                if re.match(r"[A-Za-z0-9_.-]+", dep).group(0) not in self._deps:
                    return False
            else:
                if other == self.name:
                    continue
                raise RecipeError(f"condition {cond!r}: the stub cannot evaluate {other!r}")
        return True

    def __contains__(self, cond):
        return self.satisfies(cond)

    def __getitem__(self, name):
        if name not in self._deps:
            raise RecipeError(f"spec[{name!r}]: {self.describe()} has no dependency {name!r}")
        return Dep(name)

    def describe(self):
        return self.name + "".join(("+" if v else "~") + k for k, v in sorted(self._values.items()))


class PackageBase:
    def __init__(self, spec):
        self.spec = spec

    @classmethod
    def has_variant(cls, name):
        return name in DIRECTIVES.variants

    def _activate_or_not(self, name, on, off, activation_value=None, variant=None):
        # As Spack's AutotoolsBuilder._activate_or_not for a boolean variant.
        variant = variant or name
        if not self.has_variant(variant):
            raise RecipeError(f'"{variant}" is not a variant of the recipe (with_or_without/enable_or_disable)')
        if variant not in self.spec.variants:
            return []
        if activation_value == "prefix":
            activation_value = lambda x: self.spec[x].prefix  # noqa: E731
        if self.spec.variants[variant].value:
            line = f"--{on}-{name}"
            if activation_value is not None and activation_value(name):
                line = f"{line}={activation_value(name)}"
            return [line]
        return [f"--{off}-{name}"]

    def with_or_without(self, name, activation_value=None, variant=None):
        return self._activate_or_not(name, "with", "without", activation_value, variant)

    def enable_or_disable(self, name, activation_value=None, variant=None):
        return self._activate_or_not(name, "enable", "disable", activation_value, variant)


class AutotoolsPackage(PackageBase):
    pass


STUB_EXPORTS = {
    "AutotoolsPackage": AutotoolsPackage,
    "PackageBase": PackageBase,
    "Executable": Executable,
    "Prefix": Prefix,
    "version": version,
    "variant": variant,
    "depends_on": depends_on,
    "conflicts": conflicts,
    "requires": requires,
    "license": license,
    "maintainers": maintainers,
    "patch": patch,
    "resource": resource,
    "provides": provides,
    "extends": extends,
    "build_system": build_system,
    "when": when,
    "run_after": run_after,
    "run_before": run_before,
    "on_package_attributes": on_package_attributes,
    "which": which,
    "working_dir": working_dir,
    "filter_file": filter_file,
    "install": install,
    "install_tree": install_tree,
    "mkdirp": mkdirp,
    "make": make,
}


def install_stub_modules():
    package = types.ModuleType("spack.package")
    package.__dict__.update(STUB_EXPORTS)
    package.__all__ = sorted(STUB_EXPORTS)
    autotools = types.ModuleType("spack_repo.builtin.build_systems.autotools")
    autotools.AutotoolsPackage = AutotoolsPackage
    for name, mod in {
        "spack": types.ModuleType("spack"),
        "spack.package": package,
        "spack_repo": types.ModuleType("spack_repo"),
        "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
        "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
        "spack_repo.builtin.build_systems.autotools": autotools,
    }.items():
        sys.modules[name] = mod


def unknown_globals(tree):
    """Global names the module reads that nothing defines (the stub, the module itself, builtins)."""
    defined = set(STUB_EXPORTS) | set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name != "*":
                    defined.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    missing = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined:
            missing.add((node.id, node.lineno))
    return sorted(missing, key=lambda x: x[1])


# --------------------------------------------------------------------------------------------------------
# What configure accepts.


class Accepted:
    def __init__(self):
        self.enable = {}  # feature -> how --help shows --enable-X: "none", "optional", "required", or None
        self.with_ = {}
        self.other = set()  # --prefix, --libdir, ...
        self.env = set()  # CC, CXXFLAGS, ...


def from_help(text):
    acc = Accepted()
    in_env = False
    for line in text.splitlines():
        if line.startswith("Some influential environment variables"):
            in_env = True
            continue
        if in_env:
            m = re.match(r"\s+([A-Z_][A-Z0-9_]*)\s", line)
            if m:
                acc.env.add(m.group(1))
            continue
        # "--with-cuda[=DIR]", "--with-hwloc=DIR", "--enable-werror"; not the placeholders "--with-PACKAGE".
        m = re.match(r"\s+(--[a-z][a-z0-9_-]*)(?![A-Za-z0-9_-])(\[=[^\]\s]*\]|=[^\s,]+)?", line)
        if not m:
            continue
        opt, arg = m.group(1), m.group(2)
        form = "none" if arg is None else ("optional" if arg.startswith("[") else "required")
        m2 = re.match(r"--(enable|disable|with|without)-(.+)$", opt)
        if m2:
            kind, name = m2.groups()
            table = acc.enable if kind in ("enable", "disable") else acc.with_
            positive = kind in ("enable", "with")
            # The positive form's argument shape is what a value check can use; the negative one says nothing.
            if positive or name not in table:
                table[name] = form if positive else table.get(name)
        else:
            acc.other.add(opt)
    return acc


def from_m4(files):
    acc = Accepted()
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for kind, name in re.findall(r"AC_ARG_(WITH|ENABLE)\(\s*\[?([A-Za-z0-9_-]+)\]?", text):
            (acc.with_ if kind == "WITH" else acc.enable)[name] = None
    return acc


def check_option(opt, acc):
    """An error message for a configure option configure does not accept, else None."""
    m = re.match(r"--(enable|disable|with|without)-([A-Za-z0-9_-]+)(=(.*))?$", opt)
    if m:
        kind, name, value = m.group(1), m.group(2), m.group(4)
        table = acc.enable if kind in ("enable", "disable") else acc.with_
        word = "enable" if table is acc.enable else "with"
        if name not in table:
            return f"{opt}: configure has no --{word}-{name} (nor --{'disable' if word == 'enable' else 'without'}-{name})"
        if kind in ("disable", "without") and value is not None:
            return f"{opt}: --{kind}-{name} takes no value"
        if value is not None and value not in ("yes", "no") and table[name] == "none":
            return f"{opt}: configure's --{word}-{name} takes no value (it would be ignored)"
        return None
    m = re.match(r"(--[a-z][a-z0-9_-]*)(=.*)?$", opt)
    if m:
        if m.group(1) in acc.other:
            return None
        return f"{opt}: configure does not list {m.group(1)}"
    m = re.match(r"([A-Z_][A-Z0-9_]*)=", opt)
    if m and (m.group(1) in acc.env or not acc.env):
        return None
    return f"{opt!r}: not a configure option"


# --------------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--configure", help="configure script: its --help output is the reference")
    src.add_argument("--m4", nargs="+", help="configure.ac and macro files: their AC_ARG_* names")
    args = ap.parse_args()

    errors = []
    with open(args.recipe, encoding="utf-8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename=args.recipe)
    except SyntaxError as e:
        print(f"FAIL {args.recipe}:{e.lineno}: {e.msg}")
        return 1
    for name, line in unknown_globals(tree):
        errors.append(f"{args.recipe}:{line}: name {name!r} is defined neither by the recipe nor by spack.package")

    install_stub_modules()
    namespace = {"__name__": "spack_recipe", "__file__": args.recipe}
    try:
        exec(compile(tree, args.recipe, "exec"), namespace)
    except Exception as e:  # noqa: BLE001: anything the class body raises is a recipe error
        for err in errors:
            print("FAIL " + err)
        print(f"FAIL executing {args.recipe}: {type(e).__name__}: {e}")
        return 1
    classes = [
        v for v in namespace.values() if isinstance(v, type) and issubclass(v, PackageBase) and v not in (PackageBase, AutotoolsPackage)
    ]
    if len(classes) != 1:
        print(f"FAIL {args.recipe}: expected one package class, found {len(classes)}")
        return 1
    cls = classes[0]
    if not issubclass(cls, AutotoolsPackage):
        errors.append(f"{cls.__name__} is not an AutotoolsPackage")
    pkg_name = re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__).lower()
    if not DIRECTIVES.versions:
        errors.append("the recipe declares no version()")

    if args.configure:
        try:
            out = subprocess.run(
                ["sh", args.configure, "--help"], check=True, capture_output=True, text=True
            ).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"FAIL {args.configure} --help: {e}")
            return 1
        acc = from_help(out)
        reference = f"{args.configure} --help"
    else:
        acc = from_m4(args.m4)
        reference = "AC_ARG_* of " + " ".join(args.m4)
    if not acc.with_ and not acc.enable:
        print(f"FAIL {reference}: no --with/--enable options found")
        return 1

    names = list(DIRECTIVES.variants)
    known = set(names)
    # Conditions of variants, dependencies and conflicts must name variants of the recipe.
    probe = Spec(pkg_name, {}, set(), known)
    for what, cond in (
        [(f"variant {n}", v["when"]) for n, v in DIRECTIVES.variants.items()]
        + [(f"depends_on {d}", w) for d, w, _ in DIRECTIVES.depends]
        + [(f"conflicts {c}", w) for c, w, _ in DIRECTIVES.conflicts]
        + [(f"conflicts {c}", c) for c, _, _ in DIRECTIVES.conflicts]
    ):
        try:
            if cond:
                probe.satisfies(cond)
        except RecipeError as e:
            errors.append(f"{what}: {e}")
    if errors:
        for e in errors:
            print("FAIL " + e)
        return 1

    seen = set()
    combos = 0
    produced = set()
    for values in itertools.product([True, False], repeat=len(names)):
        chosen = dict(zip(names, values))
        # A conditional variant exists only where its condition holds (conditions on other variants).
        present = dict(chosen)
        changed = True
        while changed:
            changed = False
            for n in list(present):
                w = DIRECTIVES.variants[n]["when"]
                if w and not Spec(pkg_name, present, set(), known).satisfies(w):
                    del present[n]
                    changed = True
        key = tuple(sorted(present.items()))
        if key in seen:
            continue
        seen.add(key)
        bare = Spec(pkg_name, present, set(), known)
        deps = {d for d, w, _ in DIRECTIVES.depends if not w or bare.satisfies(w)}
        spec = Spec(pkg_name, present, deps, known)
        clash = [c for c, w, _ in DIRECTIVES.conflicts if spec.satisfies(c) and (not w or spec.satisfies(w))]
        if clash:
            print(f"skip {spec.describe()}: conflicts({clash[0]!r})")
            continue
        unmet = [r for r, w in DIRECTIVES.requires if (not w or spec.satisfies(w)) and not any(spec.satisfies(x) for x in r)]
        if unmet:
            print(f"skip {spec.describe()}: requires{unmet[0]!r}")
            continue
        combos += 1
        try:
            opts = cls(spec).configure_args()
        except RecipeError as e:
            errors.append(f"{spec.describe()}: {e}")
            continue
        except Exception as e:  # noqa: BLE001
            errors.append(f"{spec.describe()}: configure_args() raised {type(e).__name__}: {e}")
            continue
        if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
            errors.append(f"{spec.describe()}: configure_args() must return a list of strings, got {opts!r}")
            continue
        print(f"{spec.describe()}: configure {' '.join(opts)}")
        for o in opts:
            produced.add(o)
            err = check_option(o, acc)
            if err:
                errors.append(f"{spec.describe()}: {err}")
    if errors:
        for e in dict.fromkeys(errors):
            print("FAIL " + e)
        print(f"FAIL: {len(set(errors))} problem(s); options checked against {reference}")
        return 1
    print(f"PASS {combos} variant combinations, {len(produced)} distinct options, all accepted by {reference}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
