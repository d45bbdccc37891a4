"""Images a tool showed the model (a browser call's screenshot), placed as each provider accepts them.

Callers put them on the chat-completions ``tool`` message they belong to, under :data:`IMAGES_KEY`:
``[{"media_type": "image/jpeg", "data": "<base64>"}]``. That key is ours, not the API's, so it never
goes out as it is:

* OpenAI-compatible chat completions (:func:`openai_messages`): a ``tool`` message carries text only,
  so after each run of consecutive tool messages comes one ``user`` message holding, per tool message
  with images, a text part naming its call and an ``image_url`` part per image (a ``data:`` URL);
* Anthropic's Messages API (anthropic.py): an ``image`` block inside the call's ``tool_result``.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = ["IMAGES_KEY", "images_of", "openai_messages"]

IMAGES_KEY = "images"


def images_of(message: dict[str, Any]) -> list[dict[str, str]]:
    """The images a message carries (media type and base64 data each); none for a message without."""
    raw = message.get(IMAGES_KEY)
    if not isinstance(raw, list):
        return []
    images: list[dict[str, str]] = []
    for item in cast(list[Any], raw):
        if isinstance(item, dict):
            image = cast(dict[str, Any], item)
            images.append(
                {"media_type": str(image.get("media_type") or ""), "data": str(image.get("data") or "")}
            )
    return images


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as an OpenAI-compatible endpoint takes them: without :data:`IMAGES_KEY`, each tool
    run's images in a user message right after it (the list itself when no message has images)."""
    if not any(IMAGES_KEY in message for message in messages):
        return messages
    placed: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "tool" and shown:
            placed.append({"role": "user", "content": shown})
            shown = []
        images = images_of(message)
        placed.append({key: value for key, value in message.items() if key != IMAGES_KEY})
        if images and message.get("role") == "tool":
            call = str(message.get("tool_call_id") or "")
            shown.append({"type": "text", "text": f"Image(s) from tool call {call}:"})
            shown.extend(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{image['media_type']};base64,{image['data']}"},
                }
                for image in images
            )
    if shown:
        placed.append({"role": "user", "content": shown})
    return placed
