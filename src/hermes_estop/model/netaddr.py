"""Addresses the project's servers bind to (the gateway's line server, `hermes serve --http`):
both refuse a non-loopback address unless told otherwise, by this one rule."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """`localhost`, or an IPv4/IPv6 loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
