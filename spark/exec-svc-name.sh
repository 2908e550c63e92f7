#!/bin/sh
# spark-exec-svc: the Service name of one Spark executor, computed in POSIX sh.
#
#   exec-svc-name.sh APP_ID EXEC_ID   prints the name followed by a newline
#   exec-svc-name.sh --batch          reads lines "APP_ID<TAB>EXEC_ID" on stdin and prints one
#                                     name per line (used by the tests to avoid a process per input)
#
# This is byte for byte the rule of shared/model/naming.ts (executorServiceName); docs/naming.md
# explains it. Runs under dash and busybox ash; needs only printf (builtin), tr and sha256sum
# (coreutils or busybox). Everything is done in the C locale so that tr works on bytes.
#
#  1. candidate = "svc-" APP "-exec-" EXEC; if it is a DNS-1035 label (only [a-z0-9-], starts
#     with a letter - it always starts with "s" -, does not end with "-", <= 63 bytes): print it.
#  2. otherwise hash = first 10 hex digits of sha256(APP "/" EXEC);
#     body = APP "-exec-" EXEC with every byte outside [a-zA-Z0-9] turned into "-", runs of "-"
#     squeezed to one, A-Z lower-cased, leading/trailing "-" removed, cut to 47 bytes, trailing
#     "-" removed again; print "svc-" body "-h" hash, or "svc-h" hash when body is empty.
#     (The "h" keeps every fallback apart from every plain name, whose last part is digits.)

LC_ALL=C
export LC_ALL

exec_svc_name() {
  _esn_app=$1
  _esn_exec=$2
  _esn_cand="svc-$_esn_app-exec-$_esn_exec"
  case $_esn_cand in
    *[!a-z0-9-]* | *-) ;;
    *)
      # only [a-z0-9-] bytes here, so ${#...} counts bytes in every shell
      if [ "${#_esn_cand}" -le 63 ]; then
        printf '%s\n' "$_esn_cand"
        return 0
      fi
      ;;
  esac
  _esn_hash=$(printf '%s/%s' "$_esn_app" "$_esn_exec" | sha256sum) || return 1
  _esn_hash=${_esn_hash%%[!0-9a-f]*}
  [ "${#_esn_hash}" -eq 64 ] || return 1
  _esn_rest=${_esn_hash#??????????}
  _esn_hash=${_esn_hash%"$_esn_rest"}
  # tr -c maps every byte outside the set (newlines and UTF-8 bytes included) to "-",
  # -s squeezes runs of "-" (the ones that were there and the new ones alike)
  _esn_body=$(printf '%s-exec-%s' "$_esn_app" "$_esn_exec" | tr -cs 'a-zA-Z0-9' '-' | tr 'A-Z' 'a-z') || return 1
  _esn_body=${_esn_body#-}
  _esn_body=${_esn_body%-}
  while [ "${#_esn_body}" -gt 47 ]; do
    _esn_body=${_esn_body%?}
  done
  _esn_body=${_esn_body%-}
  if [ -z "$_esn_body" ]; then
    printf 'svc-h%s\n' "$_esn_hash"
  else
    printf 'svc-%s-h%s\n' "$_esn_body" "$_esn_hash"
  fi
}

exec_svc_name_batch() {
  _esn_tab=$(printf '\t')
  _esn_status=0
  while IFS= read -r _esn_line || [ -n "$_esn_line" ]; do
    case $_esn_line in
      *"$_esn_tab"*) ;;
      *)
        printf '%s\n' "ERROR: no TAB in input line" >&2
        printf '\n'
        _esn_status=1
        continue
        ;;
    esac
    if ! exec_svc_name "${_esn_line%%"$_esn_tab"*}" "${_esn_line#*"$_esn_tab"}"; then
      printf '\n'
      _esn_status=1
    fi
  done
  return "$_esn_status"
}

case $# in
  1)
    if [ "$1" = --batch ]; then
      exec_svc_name_batch
      exit $?
    fi
    ;;
  2)
    exec_svc_name "$1" "$2"
    exit $?
    ;;
esac
printf '%s\n' "usage: exec-svc-name.sh APP_ID EXEC_ID | exec-svc-name.sh --batch" >&2
exit 2
