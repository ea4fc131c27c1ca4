# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that try each Python on this machine: pythons_here prints the
# candidates, one path per line, pyenv's builds first, then python.org's (a pattern that
# matched nothing is printed as it is; callers skip what is not executable).
pythons_here() {
  local root python
  for root in "${PYENV_ROOT:-}" "$HOME/.pyenv" /root/.pyenv; do
    if [ -n "$root" ] && [ -d "$root/versions" ]; then
      printf '%s\n' "$root"/versions/3.*/bin/python3
    fi
  done
  for python in /usr/local/bin/python3.* /opt/python*/bin/python3; do
    if [ -x "$python" ]; then printf '%s\n' "$python"; fi
  done
}
