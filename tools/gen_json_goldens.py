#!/usr/bin/env python3
"""Goldens for cc::py_json_dumps: what Python's json.dumps (the chat templates' tojson) writes.

Run: python3 tools/gen_json_goldens.py > tests/data/json_dumps_goldens.jsonl
Each line: {"input": <JSON text>, "compact": json.dumps(v, ensure_ascii=False),
            "indent4": json.dumps(v, ensure_ascii=False, indent=4)}
"""
import json

INPUTS = [
    '{}', '[]', 'null', 'true', 'false', '0', '-7', '18446744073709551615', '9223372036854775807',
    '1.0', '-0.0', '0.5', '3.14159', '1e16', '1e15', '123456789012345678', '1.5e-5', '0.0001', '0.00001',
    '2.5e+300', '1e-300', '100.0', '0.1', '1234.5678', '6.02214076e23', '-2.5e-7', '12345678901234567890.0',
    '"plain"', '"quote \\" and backslash \\\\"', '"tab\\t newline\\n cr\\r bs\\b ff\\f"',
    '"ctrl \\u0001 \\u001f del \\u007f"', '"unicode é 中文 😀 \\u2028"', '"slash / and <tag>"',
    '{"b": 1, "a": [1, 2, {"c": null}], "d": {}}',
    '[[], {}, [[]], {"x": []}]',
    '{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in °C", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", '
    '"minimum": 1, "maximum": 14, "default": 3}, "ratio": {"type": "number", "default": 0.5}}, "required": ["city"]}}}',
]

for text in INPUTS:
    v = json.loads(text)
    print(json.dumps({"input": text,
                      "compact": json.dumps(v, ensure_ascii=False),
                      "indent4": json.dumps(v, ensure_ascii=False, indent=4)}, ensure_ascii=False))
