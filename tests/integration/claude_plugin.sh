#!/usr/bin/env bash
# The repository is a Claude Code plugin and its own marketplace. With the pinned Claude Code CLI
# (tests/npm) in a throw-away HOME, offline: `claude plugin validate` accepts the repository, the
# plugin installs from the local marketplace, and `claude mcp list` shows the plugin's server
# connected. The plugin's .mcp.json starts scripts/autocomp-mcp-launch.sh, pointed at the binary under
# test through AUTOCOMP_MCP_BIN. Network: updates, telemetry and non-essential traffic are off and
# outbound HTTP(S) goes to a dead local proxy.
# usage: claude_plugin.sh [path/to/autocomp-mcp]
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../npm" && pwd)/common.sh"

require_binary
npm_clients_install
export AUTOCOMP_MCP_BIN="$BIN"
claude_offline_sandbox

# Manifests parse as JSON and name the same plugin.
if python3 - "$REPO_ROOT" <<'PY'
import json, sys, os
root = sys.argv[1]
plugin = json.load(open(os.path.join(root, ".claude-plugin/plugin.json")))
market = json.load(open(os.path.join(root, ".claude-plugin/marketplace.json")))
mcp = json.load(open(os.path.join(root, ".mcp.json")))
assert plugin["name"] in [p["name"] for p in market["plugins"]], "marketplace lacks the plugin"
assert "${CLAUDE_PLUGIN_ROOT}" in mcp["mcpServers"]["autocomp"]["command"]
PY
then pass "plugin.json, marketplace.json and .mcp.json agree"
else fail "plugin manifests" "see the Python error above"; fi

plugin_name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' \
  "$REPO_ROOT/.claude-plugin/plugin.json")
market_name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' \
  "$REPO_ROOT/.claude-plugin/marketplace.json")

rc=0; claude_cmd "$WORK_DIR/validate.txt" plugin validate "$REPO_ROOT" || rc=$?
if ((rc == 0)) && grep -q '✔ Validation passed' "$WORK_DIR/validate.txt"; then
  pass "claude plugin validate <repo>"
else
  fail "claude plugin validate <repo>" "exit $rc"; show "$WORK_DIR/validate.txt"
fi

for part in "mcpServers: autocomp" "skills: ${plugin_name}:nki-optimization" \
  "commands: ${plugin_name}:optimize-kernel" "commands: ${plugin_name}:profile-kernel"; do
  if grep -qF "$part" "$WORK_DIR/validate.txt"; then pass "plugin provides $part"
  else fail "plugin provides $part" "not in claude plugin validate's list"; fi
done

rc=0; claude_cmd "$WORK_DIR/market.txt" plugin marketplace add "$REPO_ROOT" || rc=$?
if ((rc == 0)); then pass "claude plugin marketplace add <repo>"
else fail "claude plugin marketplace add" "exit $rc"; show "$WORK_DIR/market.txt"; fi

rc=0; claude_cmd "$WORK_DIR/install.txt" plugin install "$plugin_name@$market_name" || rc=$?
if ((rc == 0)); then pass "claude plugin install $plugin_name@$market_name"
else fail "claude plugin install" "exit $rc"; show "$WORK_DIR/install.txt"; fi

rc=0; claude_cmd "$WORK_DIR/list.txt" mcp list || rc=$?
echo "claude mcp list (exit $rc):"
show "$WORK_DIR/list.txt"
if grep -Eq "^plugin:${plugin_name}:autocomp: .* - ✔ Connected\$" "$WORK_DIR/list.txt"; then
  pass "claude mcp list: plugin:${plugin_name}:autocomp ✔ Connected"
else
  fail "claude mcp list: plugin server" "$(grep -i 'autocomp' "$WORK_DIR/list.txt" || echo 'not listed')"
fi
if grep -q "$REPO_ROOT/scripts/autocomp-mcp-launch.sh\|autocomp-mcp-launch.sh" "$WORK_DIR/list.txt"; then
  pass "the plugin's server runs through scripts/autocomp-mcp-launch.sh"
else
  fail "plugin server command" "launcher not named in claude mcp list"
fi

finish
