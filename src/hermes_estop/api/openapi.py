"""The write API described for machines: OpenAPI 3.1, served at `/api/v1/openapi.json`."""

from __future__ import annotations

from typing import Any

from hermes_estop import __version__

__all__ = ["openapi_document"]

_ERROR = {"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ERRORS = {str(code): {**_ERROR, "description": why} for code, why in (
    (400, "malformed request (the field is named)"), (401, "no or bad credentials"),
    (403, "role too low, the write API is off, or the fleet's policy refuses the write"),
    (404, "no such hold, window or endpoint"), (409, "a conflicting write"),
    (412, "If-Match names a generation that no longer stands, or If-None-Match: * finds a hold (it is in the body)"),
    (413, "body over 64 KiB"), (429, "rate-limited"), (503, "the store does not answer"))}
_IF_MATCH = {"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"},
             "description": 'The hold\'s ETag as the caller saw it ("<generation>", quoted, RFC 9110; a list, or * '
                            'for whatever stands). Without it the write is not fenced.'}
_IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string", "enum": ["*"]},
                  "description": "*: arm only where nothing stands (412 with the hold that stands, left as it is)."}
_HOLD_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"},
            "description": "The scope (`fleet` or a profile) for a full hold; `scope:hold` for a scoped hold."}
_WINDOW = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_JSON_HOLD = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Hold"}}},
              "headers": {"ETag": {"description": 'The hold\'s generation, quoted: send it back as If-Match',
                                   "schema": {"type": "string"}}}}
_SKIP_BODY = {"required": False, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": False,
              "properties": {"on": {"type": "string", "format": "date"}, "occurrence": {"type": "string", "format": "date-time"}}}}}}


def _query(name: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": kind}}


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "hermes-estop write API", "version": __version__,
                 "description": "Pause and resume an agent fleet. Every write is audited as token:NAME."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error", "status"],
                          "properties": {"error": {"type": "string"}, "status": {"type": "integer"},
                                         "field": {"type": "string"}, "hold": {"type": "object"}}},
                "Hold": {"type": "object", "properties": {
                    "id": {"type": "string"}, "scope": {"type": "string"}, "generation": {"type": "string"},
                    "reason": {"type": ["string", "null"]}, "engaged_at": {"type": "string", "format": "date-time"},
                    "expires_at": {"type": ["string", "null"], "format": "date-time"},
                    "allow": {"type": "object"}, "armed_by": {"type": ["string", "null"]},
                    "selector": {"type": ["object", "null"]}}},
                "Pause": {"type": "object", "additionalProperties": False, "properties": {
                    "reason": {"type": "string"}, "ttl": {"type": "string", "examples": ["45m"]},
                    "until": {"type": "string", "format": "date-time"}, "scope": {"type": "string", "default": "fleet"},
                    "allow": {"type": "object", "properties": {"user_ids": {"type": "array", "items": {"type": "string"}},
                                                               "profiles": {"type": "array", "items": {"type": "string"}}}},
                    "only": {"type": "array", "items": {"type": "string"}},
                    "jobs": {"type": "array", "items": {"type": "string"}}, "replace": {"type": "boolean"}}},
                "Extend": {"type": "object", "additionalProperties": False,
                           "properties": {"ttl": {"type": "string"}, "until": {"type": "string", "format": "date-time"}}},
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/status": {"get": {"summary": "The status document (hermes status --json, with `timeline` and "
                                               "`section_lines`: the sections' text as hermes status prints them); viewer",
                                       "responses": {"200": {"description": "the status"}, **_ERRORS}}},
            "/api/v1/check": {"get": {
                "summary": "The verdict on a unit of work (hermes check --json, plus `line` and `held_by`); viewer",
                "parameters": [_query(name) for name in ("user", "profile", "component", "job")],
                "responses": {"200": {"description": "the verdict"}, **_ERRORS}}},
            "/api/v1/history": {"get": {
                "summary": "The audit trail's newest events (hermes history --json) and the corrupt entries skipped; viewer",
                "parameters": [_query("limit", "integer"), _query("since")],
                "responses": {"200": {"description": "{events, corrupt}"}, **_ERRORS}}},
            "/api/v1/windows": {"get": {"summary": "The windows (hermes windows list --json); viewer",
                                        "responses": {"200": {"description": "{path, windows}"}, **_ERRORS}}},
            "/api/v1/windows/next": {"get": {
                "summary": "The next occurrences (hermes windows next --json, each with its timezone); viewer",
                "parameters": [_query("name"), _query("count", "integer")],
                "responses": {"200": {"description": "{now, occurrences}"}, **_ERRORS}}},
            "/api/v1/holds": {"post": {
                "summary": "Arm or re-arm a hold; operator",
                "parameters": [_IF_MATCH, _IF_NONE_MATCH],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pause"}}}},
                "responses": {"201": {"description": "the hold armed", **_JSON_HOLD}, **_ERRORS}}},
            "/api/v1/holds/{id}": {"get": {
                "summary": "One hold as it stands, its generation as the ETag; viewer",
                "parameters": [_HOLD_ID],
                "responses": {"200": {"description": "the hold", **_JSON_HOLD}, **_ERRORS}}, "delete": {
                "summary": "Lift a hold; operator (the holds it armed) or admin (any)",
                "parameters": [_HOLD_ID, _IF_MATCH],
                "responses": {"200": {"description": "the hold lifted"}, **_ERRORS}}},
            "/api/v1/holds/{id}/extend": {"post": {
                "summary": "A new deadline for a standing hold; operator",
                "parameters": [_HOLD_ID, _IF_MATCH],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Extend"}}}},
                "responses": {"200": {"description": "the hold, re-armed with its new deadline", **_JSON_HOLD}, **_ERRORS}}},
            "/api/v1/windows/{name}/skip": {
                "post": {"summary": "Skip an occurrence (default: the next); operator", "parameters": [_WINDOW],
                         "requestBody": _SKIP_BODY, "responses": {"200": {"description": "skipped"}, **_ERRORS}},
                "delete": {"summary": "Un-skip an occurrence; operator", "parameters": [_WINDOW],
                           "requestBody": _SKIP_BODY, "responses": {"200": {"description": "unskipped"}, **_ERRORS}}},
            "/api/v1/openapi.json": {"get": {"summary": "This document", "security": [],
                                             "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        },
    }
