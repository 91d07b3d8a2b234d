"""BFCL's Java and JavaScript argument rules: in those categories a model passes every argument as source text
(``"true"``, ``"42L"``, ``"new ArrayList<>(Arrays.asList(\\"a\\"))"``, ``"{'k': 1}"``), and BFCL's checker converts
that text by the parameter's declared type before the usual value checks. A value that is not a string is a type
error; text that does not read as the declared type stays a string (and then fails the type check, as in BFCL).

The readers follow the rules of BFCL's ``java_type_converter`` and ``js_type_converter`` (regular expressions over
the source text, elements split at commas), their quirks included, since agreeing with BFCL's verdict is the point:
a ``char`` is kept as written, a ``String`` element of a Java array keeps its quotes, JavaScript arrays and objects
that do not read fall back to the text.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

LANGUAGES = ("python", "java", "javascript")

JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "long": int, "float": float, "double": float, "boolean": bool,
    "char": str, "String": str, "any": str, "Array": list, "ArrayList": list, "Queue": list, "Stack": list,
    "HashMap": dict, "Hashtable": dict, "Set": set,
}
JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict, "array": list,
    "any": str,
}
NESTED = ("Array", "ArrayList", "array")  # declared types whose ``items`` type converts each element
# Type names only BFCL's Java or JavaScript docs use (``String`` is both's; Python docs use none of these).
_JAVA_ONLY = frozenset({"long", "double", "char", "byte", "short", "HashMap", "Hashtable", "ArrayList", "Array",
                        "Queue", "Stack", "Set"})
_JS_ONLY = frozenset({"Boolean", "Bigint"})


# BFCL reads collections with backtracking regular expressions: its 2-D array pattern takes exponential time on an
# unclosed run of rows, its object pattern quadratic time. Text past these bounds is left unread (it stays a string,
# which then fails the type check), so a hostile value costs milliseconds.
MAX_COLLECTION_CHARS = 1000
MAX_ROW_BRACKETS = 16


class Unsupported(ValueError):
    """A declared type BFCL's converters cannot read (``Set``, ``Queue``, an unknown name): the call fails."""


# The hints BFCL appends to the docs it offers in these categories, where every parameter is typed "string".
_TYPE_HINT = re.compile(r"This is (Java|JavaScript) (\w+) type parameter in string representation")
_ANY_HINT = re.compile(r"can be of any type of (Java|JavaScript) object in string representation")
_ITEMS_HINT = re.compile(r"The list elements are of type (\w+); they are not in string representation")
_SYNTAX_HINT = re.compile(r"Note that the provided function is in (Java 8 SDK|JavaScript) syntax")


def detect(properties: list[dict[str, Any]], descriptions: Sequence[str] = ()) -> str | None:
    """The language the spec's own type names (or the hints BFCL adds to the docs it offers) give away, or None
    when they could be Python's."""
    for text in [*descriptions, *(str(p.get("description", "")) for p in properties if isinstance(p, dict))]:
        if "Java" not in text:  # every hint names Java or JavaScript: one substring search clears most texts
            continue
        m = _SYNTAX_HINT.search(text) or _TYPE_HINT.search(text) or _ANY_HINT.search(text)
        if m:
            return "javascript" if m.group(1) == "JavaScript" else "java"
    types = {p.get("type") for p in properties if isinstance(p, dict)}
    if types & _JS_ONLY or ("String" in types and types & {"array", "dict"}):
        return "javascript"
    if types & _JAVA_ONLY or "String" in types:
        return "java"
    return None


def language_of_id(text: Any) -> str | None:
    """BFCL's entry ids and category names say the language (``simple_java_3``, ``simple_javascript``)."""
    if not isinstance(text, str):
        return None
    if "javascript" in text:
        return "javascript"
    return "java" if "java" in text else None


# --- Java ----------------------------------------------------------------------------------------------------------

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_AS_LIST = re.compile(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)")
_ADDS = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_ADD = re.compile(r"add\((.+?)\)")
_EMPTY_LIST = re.compile(r"new\s+ArrayList<\w*>\(\)")
_ARRAY = re.compile(r"new\s+\w+\[\]\s*\{(.*?)\}")
_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.DOTALL)
_PUT = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_EMPTY_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)")


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def java_value(text: str) -> Any:
    """An element of a Java collection written without a declared type."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(text[:-1])
    return _number_or_text(text)


def _java_element(text: str, nested: str | None, strip_quotes: bool) -> Any:
    if strip_quotes and nested in ("char", "String"):
        return text[1:-1]
    return java(text, nested) if nested else java_value(text)


def java(text: str, declared: str, nested: str | None = None) -> Any:
    """Java source text read as ``declared``."""
    if declared not in JAVA_TYPES:
        raise Unsupported(f"Java type {declared!r}")
    if declared in ("byte", "short", "integer"):
        return int(text) if _INT.match(text) else text
    if declared == "float":
        return float(text[:-1]) if _JAVA_FLOAT.match(text) else text
    if declared == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else text
    if declared == "long":
        return int(text[:-1]) if _JAVA_LONG.match(text) else text
    if declared == "boolean":
        return text == "true" if text in ("true", "false") else text
    if declared in ("char", "String", "any"):
        return text
    if len(text) > MAX_COLLECTION_CHARS and declared in ("ArrayList", "Array", "HashMap"):
        return text
    if declared == "ArrayList":
        m = _AS_LIST.search(text)
        if m:
            return [_java_element(e.strip(), nested, True) for e in m.group(1).split(",")]
        m = _ADDS.search(text)
        if m:
            return [_java_element(e.strip(), nested, True) for e in _ADD.findall(m.group(1))]
        return [] if _EMPTY_LIST.search(text) else text
    if declared == "Array":
        m = _ARRAY.search(text)
        if not m:
            return text
        return [_java_element(e.strip(), nested, False) for e in m.group(1).split(",") if e.strip()]
    if declared == "HashMap":
        m = _MAP.search(text)
        if m:
            body = m.group(1)
            return {k: java_value(v.strip()) for k, v in _PUT.findall(body)} if body.strip() else {}
        return {} if _EMPTY_MAP.search(text) else text
    raise Unsupported(f"BFCL does not convert Java {declared}")


# --- JavaScript ------------------------------------------------------------------------------------------------------

_JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
_BIGINT = re.compile(r"^-?\d+n$")
_ARRAY_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_ARRAY = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_INNER = re.compile(r"\[(.*?)\]")
_OBJECT = re.compile(r"\{(.*?)\}")
_PAIRS = re.compile(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)")


def _quoted(text: str) -> bool:
    return len(text) >= 1 and ((text[0] == text[-1] == '"') or (text[0] == text[-1] == "'"))


def js_value(text: str) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if _quoted(text):
        return text[1:-1]
    return _number_or_text(text)


def _js_array(code: str, nested: str | None) -> Any:
    m2 = _ARRAY_2D.match(code)
    if m2:
        rows = []
        for i, inner in enumerate(_INNER.findall(m2.group(0))):
            inner = inner.strip()
            if i == 0 and inner.startswith("["):
                inner = inner[1:]
            rows.append([js_value(e.strip()) for e in inner.split(",")])
        return rows
    m = _JS_ARRAY.match(code)
    if not m:
        return code
    body = m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else ""
    elements = body.strip().split(",") if body.strip() else []
    if nested:  # a quoted element is read with String as its own element type, as BFCL does
        return [js(e.strip(), nested, "String" if e.strip()[:1] in ("'", '"') else None) for e in elements]
    return [js_value(e.strip()) for e in elements]


def _js_object(code: str) -> Any:
    if code == "{}":
        return {}
    m = _OBJECT.match(code)
    if not m:
        return code
    out: dict[str, Any] = {}
    for key, value in _PAIRS.findall(m.group(1)):
        key, value = key.strip().strip("'\""), value.strip()
        if value.startswith("[") and value.endswith("]"):
            out[key] = _js_collection(value, "array", None)
        elif value.startswith("{") and value.endswith("}"):
            out[key] = _js_collection(value, "dict", None)
        else:
            out[key] = js_value(value.strip("'\""))
    return out


def _js_collection(code: str, kind: str, nested: str | None) -> Any:
    code = code.strip()
    if len(code) > MAX_COLLECTION_CHARS or (kind == "array" and code.count("[") > MAX_ROW_BRACKETS):
        return code
    try:
        return _js_array(code, nested) if kind == "array" else _js_object(code)
    except (ValueError, IndexError, RecursionError):  # BFCL keeps the text when its reader fails
        return code


def js(text: str, declared: str, nested: str | None = None) -> Any:
    """JavaScript source text read as ``declared``."""
    if declared not in JS_TYPES:
        raise Unsupported(f"JavaScript type {declared!r}")
    if declared == "String":
        return text[1:-1] if _quoted(text) else text
    if declared == "integer":
        return int(text) if _INT.match(text) else text
    if declared == "float":
        return float(text) if _JS_FLOAT.match(text) else text
    if declared == "Bigint":
        return int(text[:-1]) if _BIGINT.match(text) else text
    if declared == "Boolean":
        return text == "true" if text in ("true", "false") else text
    if declared in ("dict", "array"):
        return _js_collection(text, declared, nested)
    return text


def as_source_text(value: Any) -> Any:
    """A value read from Python call text, back as the source text BFCL's Java and JavaScript parsers hand their
    checker: a string literal loses its quotes (already, here), anything else is its text (``42``, ``True``,
    ``[1, 'a']``)."""
    return value if isinstance(value, str) else repr(value)


def convert(text: str, declared: str, nested: str | None, language: str) -> Any:
    return java(text, declared, nested) if language == "java" else js(text, declared, nested)


def declared_types(prop: dict[str, Any], language: str) -> tuple[Any, Any]:
    """(declared type, element type) of a parameter: from its spec, or, where the spec is the one BFCL offered the
    model (every type "string"), from the hints in its description."""
    declared, items = prop.get("type"), prop.get("items")
    item_type = items.get("type") if isinstance(items, dict) else None
    if declared in types_of(language) and declared != "string":
        return declared, item_type
    text = str(prop.get("description", ""))
    m = _TYPE_HINT.search(text)
    if m:
        declared = m.group(2)
    elif _ANY_HINT.search(text):
        declared = "any"
    m = _ITEMS_HINT.search(text)
    return declared, m.group(1) if m else item_type


def types_of(language: str) -> dict[str, type]:
    return JAVA_TYPES if language == "java" else JS_TYPES
