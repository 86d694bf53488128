#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Runs the README's ways of consuming rmm-next as written, against a copy of this checkout and
without network.

  check_recipes.py <root> <group> <work dir> [--cmake CMAKE] [--cxx CXX] [--cuda-root DIR]

A recipe is a ```sh or ```cmake block of README.md after a line `<!-- recipe: <name> -->`. Each
group runs some of them (every recipe belongs to one group, and every group's recipes must exist):

  install           the `install` and `install-with-plugin` shell commands, each from the root of
                    a fresh copy, then `find-package` against each prefix and the build tree
  add-subdirectory  `add-subdirectory`, with the copy as third_party/rmm-next
  fetchcontent      `fetchcontent`, from a git repository of the copy (file://, its commit)
  cpm               `cpm`, the same; needs CPM.cmake from $RMM_NEXT_CPM_CMAKE (CI has none),
                    else exits 77 (skipped), with the reason in $RMM_NEXT_SKIPPED_LOG

The copy is the checkout's tracked and untracked, not ignored, files as they are now. What the
recipes leave for the reader to fill in is replaced: /opt/rmm-next by a prefix under the work
dir, <url of rmm-next> by the copy's file:// URL, <full commit hash> by its commit. A cmake recipe
becomes the body of a project whose `app` (a .cpp including <rmm_next/rmm_next.hpp>) must build
and run.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys

GROUPS = {
    "install": ["install", "install-with-plugin", "find-package"],
    "add-subdirectory": ["add-subdirectory"],
    "fetchcontent": ["fetchcontent"],
    "cpm": ["cpm"],
}
SKIP_CODE = 77
MAIN_CPP = """#include <rmm_next/rmm_next.hpp>

#include <cstdio>

int main()
{
  rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref> map{
    [](int device) { return rmm_next::async_device_resource{device}; }, 1};
  std::printf("rmm-next %d: OK (%d device)\\n", RMM_NEXT_VERSION, map.device_count());
}
"""


def recipes(readme):
    """{name: (language, text)} of the README's recipes."""
    lines = readme.read_text().splitlines()
    found = {}
    for i, line in enumerate(lines):
        m = re.fullmatch(r"<!-- recipe: (\S+) -->", line.strip())
        if not m:
            continue
        fence = re.fullmatch(r"```(sh|cmake)", lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            sys.exit(f"FAIL README.md:{i + 1}: recipe {m.group(1)} is not followed by a sh or cmake block")
        end = lines.index("```", i + 2)
        if m.group(1) in found:
            sys.exit(f"FAIL README.md:{i + 1}: recipe {m.group(1)} appears twice")
        found[m.group(1)] = (fence.group(1), "\n".join(lines[i + 2 : end]) + "\n")
    grouped = {name for names in GROUPS.values() for name in names}
    if set(found) != grouped:
        sys.exit(
            f"FAIL README.md: recipes {sorted(found)}, expected {sorted(grouped)} "
            "(tests/docs/check_recipes.py GROUPS)"
        )
    return found


def run(command, cwd, env=None, what=None):
    print(f"--- {what or ' '.join(map(str, command))}", flush=True)
    done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        sys.exit(f"FAIL {what or command[0]}: exit status {done.returncode}")
    return done.stdout


def copy_checkout(root, dest):
    """The checkout's files as they are now, without build trees or ignored files."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def git_snapshot(tree):
    """Makes `tree` a git repository with one commit; returns that commit."""
    git = ["git", "-C", str(tree), "-c", "user.name=rmm-next tests", "-c",
           "user.email=tests@rmm-next.invalid", "-c", "init.defaultBranch=main"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + command, check=True, capture_output=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def skip(reason):
    print(f"SKIPPED: {reason}")
    # CTest shows a skipped test's output only with -V; after the tests it prints this file.
    if log := os.environ.get("RMM_NEXT_SKIPPED_LOG"):
        with open(log, "a", encoding="utf-8") as file:
            file.write(reason + "\n")
    sys.exit(SKIP_CODE)


class Runner:
    def __init__(self, args):
        self.root = pathlib.Path(args.root).resolve()
        self.work = pathlib.Path(args.work_dir).resolve()
        self.cmake = args.cmake
        self.env = dict(os.environ)
        # The `cmake` of a shell recipe is the one given; its compilers are the build's.
        self.env["PATH"] = os.pathsep.join([str(pathlib.Path(args.cmake).parent), self.env["PATH"]])
        if args.cxx:
            self.env["CXX"] = args.cxx
        if args.cuda_root:
            self.env["CUDAToolkit_ROOT"] = args.cuda_root
        self.recipes = recipes(self.root / "README.md")
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)

    def checkout(self, name):
        dest = self.work / name
        copy_checkout(self.root, dest)
        return dest

    def shell(self, name, cwd, prefix):
        _, text = self.recipes[name]
        script = text.replace("/opt/rmm-next", str(prefix))
        run(["bash", "-euo", "pipefail", "-c", script], cwd, self.env, f"recipe {name}")

    def consumer(self, name, replacements=None, extra="", configure_args=(), setup=None):
        """Configures, builds and runs a project made of the cmake recipe `name`."""
        _, text = self.recipes[name]
        for key, value in (replacements or {}).items():
            text = text.replace(key, value)
        project = self.work / f"consumer-{name}-{len(list(self.work.glob('consumer-*')))}"
        project.mkdir()
        (project / "main.cpp").write_text(MAIN_CPP)
        (project / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.25)\nproject(recipe_consumer LANGUAGES CXX)\n"
            f"add_executable(app main.cpp)\n\n{text}\n{extra}"
        )
        if setup:
            setup(project)
        build = project / "build"
        run([self.cmake, "-S", project, "-B", build, "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
             *configure_args], project, self.env, f"configure {project.name}")
        run([self.cmake, "--build", build], project, self.env, f"build {project.name}")
        output = run([build / "app"], project, self.env, f"run {project.name}")
        if ": OK" not in output:
            sys.exit(f"FAIL {project.name}: app did not print OK")

    def installed(self, prefix, plugin):
        for path in ("include/rmm_next/rmm_next.hpp", "share/doc/rmm-next/LICENSE"):
            if not (prefix / path).is_file():
                sys.exit(f"FAIL {prefix}: {path} was not installed")
        configs = list(prefix.glob("lib*/cmake/rmm-next/rmm-next-config.cmake"))
        libraries = list(prefix.glob("lib*/librmm_next_allocator.so"))
        if not configs:
            sys.exit(f"FAIL {prefix}: no lib*/cmake/rmm-next/rmm-next-config.cmake")
        if bool(libraries) != plugin:
            sys.exit(f"FAIL {prefix}: librmm_next_allocator.so {'missing' if plugin else 'installed'}")

    @staticmethod
    def plugin_check(expected):
        condition = "NOT TARGET" if expected else "TARGET"
        return (f"if({condition} rmm-next::allocator_plugin)\n  message(FATAL_ERROR "
                f"\"rmm-next::allocator_plugin should {'' if expected else 'not '}be defined\")\n"
                "endif()\n")

    def group_install(self):
        header_only, with_plugin = self.work / "prefix-headers", self.work / "prefix-plugin"
        # A header-only install runs right after configuring: nothing is built.
        source = self.checkout("src")
        self.shell("install", source, header_only)
        self.installed(header_only, plugin=False)
        shutil.rmtree(source / "build")
        self.shell("install-with-plugin", source, with_plugin)
        self.installed(with_plugin, plugin=True)
        self.consumer("find-package", extra=self.plugin_check(False),
                      configure_args=[f"-DCMAKE_PREFIX_PATH={header_only}"])
        self.consumer("find-package", extra=self.plugin_check(True),
                      configure_args=[f"-DCMAKE_PREFIX_PATH={with_plugin}"])
        # From the build tree: rmm-next_DIR=<build dir>, the plugin target included.
        self.consumer("find-package", extra=self.plugin_check(True),
                      configure_args=[f"-Drmm-next_DIR={source / 'build'}"])

    def group_add_subdirectory(self):
        def vendor(project):
            copy_checkout(self.root, project / "third_party" / "rmm-next")

        self.consumer("add-subdirectory", setup=vendor)

    def from_git(self, name, setup=None):
        source = self.checkout("src")
        commit = git_snapshot(source)
        self.consumer(name, {"<url of rmm-next>": source.as_uri(), "<full commit hash>": commit},
                      setup=setup)

    def group_fetchcontent(self):
        self.from_git("fetchcontent")

    def group_cpm(self):
        cpm = os.environ.get("RMM_NEXT_CPM_CMAKE")
        if not cpm or not pathlib.Path(cpm).is_file():
            skip("docs_recipes.cpm: CPM.cmake not found (set RMM_NEXT_CPM_CMAKE to its path; "
                 "CI has no copy: it reaches no GitHub)")

        def add_cpm(project):
            (project / "cmake").mkdir()
            shutil.copy(cpm, project / "cmake" / "CPM.cmake")

        self.from_git("cpm", setup=add_cpm)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("group", choices=sorted(GROUPS))
    parser.add_argument("work_dir")
    parser.add_argument("--cmake", default=shutil.which("cmake"))
    parser.add_argument("--cxx")
    parser.add_argument("--cuda-root")
    args = parser.parse_args()
    runner = Runner(args)
    getattr(runner, "group_" + args.group.replace("-", "_"))()
    print(f"docs_recipes.{args.group}: {', '.join(GROUPS[args.group])} ran as written")


if __name__ == "__main__":
    main()
