#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Checks every relative link and #anchor of README.md, python/README.md and docs/*.md.

A link [text](target) or <a href="target"> whose target has no scheme (http:, mailto:, ...) must
name a file or directory of the repository, relative to the document; a #fragment must be an
anchor of the Markdown file it names (or of the document itself). Anchors follow GitHub's rules:
each heading's text, lower-cased, with markup and punctuation other than '-' and '_' removed and
spaces turned into '-'; a repeated heading gets -1, -2, ...; <a name|id="..."> adds one. Code
blocks and inline code are ignored.
"""
import pathlib
import re
import sys
import urllib.parse

root = pathlib.Path(sys.argv[1]).resolve()
documents = [root / "README.md", root / "python" / "README.md", *sorted((root / "docs").glob("*.md"))]

fence = re.compile(r"^\s*(```|~~~)")
inline_code = re.compile(r"(`+)(.+?)\1")
# [text](target "title"), also inside images ![alt](target); the text may hold `code` and brackets.
markdown_link = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
reference_definition = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)")
html_link = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"", re.IGNORECASE)
html_anchor = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
heading = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path):
    """(number, line) of the lines outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if fence.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def slug(text):
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)  # punctuation, except - and _; \w keeps non-ASCII letters
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            if m := heading.match(line):
                base = slug(m.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(html_anchor.findall(line))
        _anchors[path] = found
    return _anchors[path]


failures = []
checked = 0
for doc in documents:
    for number, line in prose_lines(doc):
        text = inline_code.sub("", line)
        targets = markdown_link.findall(text) + html_link.findall(text)
        if m := reference_definition.match(text):
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http:, https:, mailto: ...: not checked here
            checked += 1
            where = f"{doc.relative_to(root)}:{number}: {target}"
            path_part, _, fragment = target.partition("#")
            path_part = urllib.parse.unquote(path_part)
            destination = (doc.parent / path_part).resolve() if path_part else doc
            if not destination.exists():
                failures.append(f"{where}: no such file")
                continue
            try:
                destination.relative_to(root)
            except ValueError:
                failures.append(f"{where}: outside the repository")
                continue
            if fragment:
                if destination.suffix != ".md" or destination.is_dir():
                    failures.append(f"{where}: an anchor into a file that is not Markdown")
                elif urllib.parse.unquote(fragment) not in anchors(destination):
                    failures.append(f"{where}: no anchor #{fragment} in "
                                    f"{destination.relative_to(root)}")

for f in failures:
    print("FAIL", f)
print(f"{checked} relative links checked, {len(failures)} failures")
sys.exit(1 if failures or checked == 0 else 0)
