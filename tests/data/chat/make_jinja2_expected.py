"""Renders engine-semantics cases with Python jinja2 configured as transformers configures it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson = json.dumps(ensure_ascii=False),
raise_exception, strftime_now at a fixed UTC instant), and writes jinja2_expected.json. The C++ test
(tests/chat/jinja2_semantics_test.cpp) renders the same cases and compares. These cover jinja2 behaviour that the
@huggingface/jinja parity test cannot (tuples, None printing, reject/select filters, Python string methods...).
Made with: python3 make_jinja2_expected.py  (jinja2 3.1.6, Python 3.11)."""
import datetime
import json
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1735787045  # 2025-01-02 03:04:05 UTC


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

VARS = {"d": {"b": [1, {"c": "x"}], "a": "é"}, "xs": [3, 1, 2], "s": "  Hello World  ", "n": None}
cases = []
for template in json.load(open(sys.argv[1], encoding="utf-8")):
    if isinstance(template, dict):
        path, _, key = template["file"].partition("#")
        source = open(path, encoding="utf-8").read()
        if key:  # a template inside a JSON file (tokenizer_config.json#chat_template)
            source = json.load(open(path, encoding="utf-8"))[key]
        variables = template["vars"]
        entry = {"name": template["name"], "template_file": template["file"], "vars": variables}
    else:
        source, variables = template, VARS
        entry = {"template": source, "vars": variables}
    try:
        entry["expected"] = env.from_string(source).render(**variables)
    except Exception as e:  # the expected result is this error message
        entry["error"] = str(e)
    cases.append(entry)
json.dump({"now": NOW, "jinja2_version": jinja2.__version__, "cases": cases},
          open("jinja2_expected.json", "w", encoding="utf-8"), ensure_ascii=False, indent=1)
print(len(cases), "cases")
