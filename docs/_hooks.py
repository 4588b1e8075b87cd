"""mkdocs hook (mkdocs.yml): links from a page to repository files outside ``docs/``
(``../experiments/gan/README.md``, written so that they also work when the Markdown is read on
GitHub or in a clone). The site has no repository address (mkdocs.yml sets no ``repo_url``), so
an image there (``![..](../experiments/.../x.png)``) is copied into the site and shown, and a
link to any other repository file becomes its path as text; with a ``repo_url`` they would link
to the repository's web page. A link to a file that does not exist is a warning, so `mkdocs
build --strict` fails on it. The notebooks (``notebooks/*.ipynb``, committed with their
outputs) are pages of the site under ``notebooks/`` (rendered by mkdocs-jupyter without
executing them), and links to them point to those pages."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.plugins import event_priority, get_plugin_logger
from mkdocs.structure.files import File

log = get_plugin_logger(__name__)

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(((?:\.\./)+[^)\s#]+)(#[^)\s]*)?\)")


def _outside_images(docs: Path, root: Path) -> set[str]:
  """Repository paths of the images outside ``docs/`` that the pages show."""
  found = set()
  for page in docs.rglob("*.md"):
    for match in _LINK.finditer(page.read_text()):
      target = (page.parent / match.group(3)).resolve()
      if match.group(1) and root in target.parents and docs not in target.parents:
        if target.is_file():
          found.add(target.relative_to(root).as_posix())
  return found


@event_priority(50)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files, config):
  docs = Path(config["docs_dir"]).resolve()
  root = docs.parent
  paths = [nb.relative_to(root).as_posix() for nb in sorted((root / "notebooks").glob("*.ipynb"))]
  if not config.get("repo_url"):
    paths += sorted(_outside_images(docs, root))
  for path in paths:
    files.append(File(path, str(root), config["site_dir"], config["use_directory_urls"]))
  return files


def on_page_markdown(markdown, page, config, files):
  docs = Path(config["docs_dir"]).resolve()
  root = docs.parent
  repo = (config.get("repo_url") or "").rstrip("/")
  here = (docs / page.file.src_uri).parent

  def outside(match: re.Match) -> str:
    bang, text, path, anchor = match.group(1), match.group(2), match.group(3), match.group(4)
    target = (here / path).resolve()
    if target == docs or docs in target.parents:
      return match.group(0)  # a page or file of the site: mkdocs checks it
    if target.suffix == ".ipynb" and target.parent == root / "notebooks" and target.exists():
      return f"[{text}]({os.path.relpath(docs / 'notebooks' / target.name, here)})"
    if root not in target.parents or not target.exists():
      log.warning(f"{page.file.src_uri}: link to {path}, which is not in the repository")
      return match.group(0)
    rel = target.relative_to(root).as_posix()
    if not repo:  # no repository address: images are in the site, other files named by path
      if bang:
        return f"![{text}]({os.path.relpath(docs / rel, here)})"
      return f"`{rel}`" if text.strip("`") == rel else f"{text} (`{rel}`)"
    if bang:
      return f"![{text}]({repo}/raw/main/{rel})"
    kind = "tree" if target.is_dir() else "blob"
    return f"[{text}]({repo}/{kind}/main/{rel}{anchor or ''})"

  return _LINK.sub(outside, markdown)
