#!/usr/bin/env python3
"""Ground truth for lift's template interpreter: renders each case with Python's Jinja2 in
the environment Hugging Face's apply_chat_template builds (trim_blocks, lstrip_blocks, the
loopcontrols extension, a {% generation %} block, tojson as json.dumps with
ensure_ascii=False, raise_exception and strftime_now).

Usage: jinja_oracle.py CASES.json  -- CASES.json is {"cases": [{"template": str,
"context": {...}, "now": unix_seconds}]}; prints a JSON list with, per case, {"output": str}
or {"error": str, "raise": bool} (raise: the template called raise_exception)."""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRaised(jinja2.exceptions.TemplateError):
    pass


class Generation(jinja2.ext.Extension):
    # HF's AssistantTracker: {% generation %} marks assistant text; the rendered text is the
    # body unchanged.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_body", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_env(now):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[Generation, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateRaised(message)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(now).strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_compiled = {}


def render(case):
    # Compiling is most of Jinja2's cost: one environment and template per (source, time).
    key = (case["template"], case.get("now", 0))
    try:
        if key not in _compiled:
            _compiled[key] = make_env(key[1]).from_string(key[0])
        return {"output": _compiled[key].render(**case["context"])}
    except TemplateRaised as e:
        return {"error": str(e), "raise": True}
    except Exception as e:  # every other failure: the interpreter must fail too
        return {"error": type(e).__name__ + ": " + str(e), "raise": False}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    json.dump([render(c) for c in cases], sys.stdout, ensure_ascii=True)


if __name__ == "__main__":
    main()
