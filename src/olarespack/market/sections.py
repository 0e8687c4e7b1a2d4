"""The Market's menu and pages for a source, as beclab/market's front end reads them (center.ts, menu.ts,
CategoryPage.vue): a menu entry is a tag whose name is one of the apps' categories (plus "All"), and a
category page shows the sections its `pages` entry lists. Without them a box lists the source's apps
nowhere. Pure: the apps' names and categories in, the info answer's sections out."""

from __future__ import annotations

import json
import re
from typing import Any

# Labels and icons of the categories the official market uses; any other category gets its own name.
KNOWN: dict[str, tuple[dict[str, str], str]] = {
    "All": ({"en-US": "Discover", "zh-CN": "发现"}, "sym_r_radar"),
    "AI": ({"en-US": "AI", "zh-CN": "人工智能"}, "sym_r_neurology"),
    "Productivity": ({"en-US": "Productivity", "zh-CN": "效率"}, "sym_r_business_center"),
    "Utilities": ({"en-US": "Utilities", "zh-CN": "实用工具"}, "sym_r_construction"),
    "Entertainment": ({"en-US": "Entertainment", "zh-CN": "娱乐"}, "sym_r_sports_esports"),
    "Developer Tools": ({"en-US": "Developer Tools", "zh-CN": "开发工具"}, "sym_r_code"),
}
NEWEST = {"type": "Default Topic", "id": "Newest"}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "category"


def category_ids(categories: list[str]) -> dict[str, str]:
    """Each category's id (a slug; "All", the menu's own entry, first), unique even where two names give one
    slug: the v1 tags' `_id` and the v2 taxonomy's category ids are these."""
    ids: dict[str, str] = {}
    for category in ["All", *sorted(set(categories) - {"All"})]:
        slug = base = _slug(category)
        number = len(ids)
        while slug in ids.values():  # "Home Lab" and "home-lab" are two categories: each keeps its own topic
            slug, number = f"{base}-{number}", number + 1
        ids[category] = slug
    return ids


def sections(apps: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """The tags, pages, topics and topic_lists of an info answer, for apps given as (name, categories) in
    the order the Market should list them (newest first)."""
    # "All" is the menu's own entry (every app); a spec's category named so adds nothing to it
    categories = sorted({category for _, names in apps for category in names} - {"All"})
    ids = category_ids(categories)
    tags: dict[str, Any] = {}
    pages: dict[str, Any] = {}
    topics: dict[str, Any] = {}
    topic_lists: dict[str, Any] = {}
    for sort, category in enumerate(["All", *categories]):
        title, icon = KNOWN.get(category, ({"en-US": category}, "sym_r_apps"))
        slug = ids[category]
        tags[category] = {"_id": slug, "name": category, "title": title, "icon": icon, "sort": sort}
        members = [name for name, names in apps if category == "All" or category in names]
        content: list[dict[str, str]] = []
        if category != "All" and members:
            topic_id, list_name = f"{slug}-apps", f"{slug}-apps"
            topics[topic_id] = {
                "_id": topic_id,
                "name": list_name,
                "data": {
                    locale: {"group": category, "title": text, "des": "", "apps": ",".join(members)}
                    for locale, text in title.items()
                },
            }
            topic_lists[list_name] = {
                "name": list_name,
                "type": "Category",
                "description": "",
                "content": topic_id,
                "title": title,
            }
            content.append({"type": "Topic", "id": list_name})
        content.append(NEWEST)
        pages[category] = {"category": category, "content": json.dumps(content, separators=(",", ":"))}
    return {"tags": tags, "pages": pages, "topics": topics, "topic_lists": topic_lists}
