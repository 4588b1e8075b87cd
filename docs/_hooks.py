"""mkdocs hook (mkdocs.yml): links from a page to repository files outside ``docs/``
(``../experiments/gan/README.md``, written so that they also work when the Markdown is read on
GitHub or in a clone) become links to the repository's web page; a link to a file that does not
exist is a warning, so `mkdocs build --strict` fails on it."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.plugins import get_plugin_logger

log = get_plugin_logger(__name__)

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(((?:\.\./)+[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):
  docs = Path(config["docs_dir"]).resolve()
  root = docs.parent
  repo = config["repo_url"].rstrip("/")
  here = (docs / page.file.src_uri).parent

  def outside(match: re.Match) -> str:
    bang, text, path, anchor = match.group(1), match.group(2), match.group(3), match.group(4)
    target = (here / path).resolve()
    if target == docs or docs in target.parents:
      return match.group(0)  # a page or file of the site: mkdocs checks it
    if root not in target.parents or not target.exists():
      log.warning(f"{page.file.src_uri}: link to {path}, which is not in the repository")
      return match.group(0)
    rel = target.relative_to(root).as_posix()
    if bang:
      return f"![{text}]({repo}/raw/main/{rel})"
    kind = "tree" if target.is_dir() else "blob"
    return f"[{text}]({repo}/{kind}/main/{rel}{anchor or ''})"

  return _LINK.sub(outside, markdown)
