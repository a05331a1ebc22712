"""The LLM layer: chat models and everything about their text. Imports the base only.

- :mod:`.chat` — chat with record/replay caching (``make_llm``, ``LLMCache``, usage accounting).
- :mod:`.models` — the embedded GGUF models; :mod:`.finetune` — LoRA fine-tuning of a small one.
- :mod:`.prompting` — the prompt files; :mod:`.parse` — LLM output parsed defensively.
"""
