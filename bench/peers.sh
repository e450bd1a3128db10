#!/bin/sh
# Install the peer filters that bench/accuracy.py compares spamnb with, from Debian's
# packages. They are benchmark tools only, never dependencies of spamnb.
# Usage: sh bench/peers.sh   (as root; does nothing when all three are present)
set -eu

missing=""
command -v bogofilter >/dev/null 2>&1 || missing="$missing bogofilter"
command -v crm >/dev/null 2>&1 || missing="$missing crm114"
command -v sa-learn >/dev/null 2>&1 || missing="$missing spamassassin"
[ -z "$missing" ] && exit 0

echo "bench/peers.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# A stale or empty package list is the usual reason an install fails on a fresh machine.
# shellcheck disable=SC2086
apt-get install -y $missing >&2 \
    || { apt-get update >&2 && apt-get install -y $missing >&2; }
