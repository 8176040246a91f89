#!/bin/bash
# The mariadb image's entrypoint, named and behaving as docker.io/library/mariadb's for what the
# render (and a SUNK user) gives it: on the first start (no mysql/ in the data directory) it
# creates the system tables, the root account, MARIADB_DATABASE and MARIADB_USER with
# MARIADB_PASSWORD (granted all on that database), runs /docker-entrypoint-initdb.d/*.sql and
# *.sh, then execs the server. Started as root, it hands the data directory to mysql (999) and
# runs as mysql; started as another user, it runs as that user.
#
# Honoured, each also as MYSQL_* and the passwords also as *_FILE: MARIADB_DATABASE,
# MARIADB_USER, MARIADB_PASSWORD, MARIADB_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD,
# MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_ROOT_HOST, MARIADB_INITDB_SKIP_TZINFO (no time
# zone tables are loaded in any case). Any other MARIADB_* variable is an error, so that none is
# ignored unnoticed. Unlike docker.io's image, a random root password is never printed: set
# MARIADB_ROOT_PASSWORD from a Secret when you need root.
set -euo pipefail

say() { printf '%s [entrypoint] %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S')" "$*" >&2; }
die() { say "error: $*"; exit 1; }

KNOWN="DATABASE USER PASSWORD ROOT_PASSWORD RANDOM_ROOT_PASSWORD ALLOW_EMPTY_ROOT_PASSWORD
ROOT_HOST INITDB_SKIP_TZINFO"
SECRET="PASSWORD ROOT_PASSWORD"
# docker.io's MYSQL_* spelling of the same settings; MYSQL_ALLOW_EMPTY_PASSWORD is the odd one.
declare -A ALIAS=([ALLOW_EMPTY_ROOT_PASSWORD]=MYSQL_ALLOW_EMPTY_PASSWORD)

check_names() {
  local name key ok
  for name in $(compgen -e); do
    case $name in
      MARIADB_*) key=${name#MARIADB_} ;;
      # Kubernetes service links of a Service named mysql: not settings.
      MYSQL_SERVICE_*|MYSQL_PORT|MYSQL_PORT_*) continue ;;
      MYSQL_ALLOW_EMPTY_PASSWORD) continue ;;
      MYSQL_*) key=${name#MYSQL_} ;;
      *) continue ;;
    esac
    ok=""
    for known in $KNOWN; do [ "$key" = "$known" ] && ok=1; done
    for known in $SECRET; do [ "$key" = "${known}_FILE" ] && ok=1; done
    [ -n "$ok" ] || die "$name is not a setting this image honours (see /usr/local/bin/docker-entrypoint.sh): remove it"
  done
}

# MARIADB_<key> from itself, its MYSQL_ twin, or (passwords) a file named by <that>_FILE.
setting() {
  local key=$1 names name value="" found=""
  names="MARIADB_$key ${ALIAS[$key]:-MYSQL_$key}"
  for name in $names; do
    local file_var="${name}_FILE"
    if [ -n "${!name:-}" ] && [ -n "${!file_var:-}" ]; then
      die "both $name and ${name}_FILE are set: keep one"
    fi
    if [ -n "${!name:-}" ]; then value=${!name}; found=1; break; fi
    if [ -n "${!file_var:-}" ]; then
      [ -r "${!file_var}" ] || die "${name}_FILE names ${!file_var}, which cannot be read"
      value=$(<"${!file_var}"); found=1; break
    fi
  done
  [ -n "$found" ] || return 0
  printf '%s' "$value"
}

sql_string() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g"; }
sql_name() { printf '%s' "$1" | sed -e 's/`/``/g'; }

# datadir or socket, as the server reads them with these arguments: the table at the end of
# --verbose --help, where a line starts with the name (a wrapped description may too, indented).
server_setting() {
  "$@" --verbose --help 2>/dev/null | awk -v key="$SERVER_KEY" 'index($0, key " ") == 1 { v = $2 }
    END { print v }'
}

temporary_server() {
  "$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --wsrep_on=OFF \
    --skip-log-bin --expire-logs-days=0 --loose-innodb_buffer_pool_load_at_startup=0 &
  SERVER_PID=$!
  local i
  for i in $(seq 1 300); do
    if mariadb --protocol=socket --socket="$SOCKET" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
      return
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || die "the temporary server exited during the first start"
    sleep 0.1
  done
  die "the temporary server did not answer on $SOCKET within 30 s"
}

first_start() {
  local database user password root_password root_host random empty
  database=$(setting DATABASE); user=$(setting USER); password=$(setting PASSWORD)
  root_password=$(setting ROOT_PASSWORD); root_host=$(setting ROOT_HOST)
  random=$(setting RANDOM_ROOT_PASSWORD); empty=$(setting ALLOW_EMPTY_ROOT_PASSWORD)
  root_host=${root_host:-%}
  if [ -z "$root_password" ] && [ -z "$random" ] && [ -z "$empty" ]; then
    die "the database is uninitialized and no root password is given: set one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD"
  fi
  [ "$user" != root ] || die "MARIADB_USER=root: root is made by MARIADB_ROOT_PASSWORD; name another user"
  [ -z "$user" ] || [ -n "$password" ] || die "MARIADB_USER is set without MARIADB_PASSWORD"
  if [ -n "$random" ] && [ -z "$root_password" ]; then
    root_password=$(head -c 48 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-32)
    say "root has a random password (not shown; set MARIADB_ROOT_PASSWORD to choose one)"
  fi

  say "first start: creating the system tables in $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --rpm --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve --skip-log-bin --expire-logs-days=0 \
    --default-time-zone=SYSTEM --loose-innodb_buffer_pool_dump_at_shutdown=0 >/dev/null
  temporary_server "$@"

  local sql
  sql="SET @@SESSION.SQL_LOG_BIN=0;
DROP USER IF EXISTS root@'127.0.0.1', root@'::1', ''@'localhost';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname, '\'');
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS \'\'@\'', @@hostname, '\'');"
  if [ -n "$root_password" ]; then
    sql+="
SET PASSWORD FOR 'root'@'localhost' = PASSWORD('$(sql_string "$root_password")');"
  fi
  if [ "$root_host" != localhost ]; then
    sql+="
CREATE USER 'root'@'$(sql_string "$root_host")' IDENTIFIED BY '$(sql_string "$root_password")';
GRANT ALL ON *.* TO 'root'@'$(sql_string "$root_host")' WITH GRANT OPTION;"
  fi
  if [ -n "$database" ]; then
    sql+="
CREATE DATABASE IF NOT EXISTS \`$(sql_name "$database")\`;"
  fi
  if [ -n "$user" ]; then
    sql+="
CREATE USER '$(sql_string "$user")'@'%' IDENTIFIED BY '$(sql_string "$password")';"
    if [ -n "$database" ]; then
      # `_` is a wildcard in a GRANT's database name: the grant is for this database only.
      sql+="
GRANT ALL ON \`$(sql_name "${database//_/\\_}")\`.* TO '$(sql_string "$user")'@'%';"
    fi
  fi
  # On stdin, never in a process's arguments: the passwords stay out of `ps`.
  mariadb --protocol=socket --socket="$SOCKET" -uroot <<<"$sql"

  local f
  for f in /docker-entrypoint-initdb.d/*; do
    [ -e "$f" ] || continue
    case $f in
      *.sql) say "running $f"; MYSQL_PWD=$root_password mariadb --protocol=socket \
               --socket="$SOCKET" -uroot ${database:+"$database"} <"$f" ;;
      *.sh) say "running $f"; bash "$f" ;;
      *) say "ignoring $f (only *.sql and *.sh are run)" ;;
    esac
  done

  kill "$SERVER_PID"
  wait "$SERVER_PID" || true
  say "first start done"
}

main() {
  if [ "$#" -eq 0 ] || [ "${1:0:1}" = - ]; then set -- mariadbd "$@"; fi
  case ${1:-} in
    mariadbd|mysqld) ;;
    *) exec "$@" ;;
  esac
  check_names
  DATADIR=$(SERVER_KEY=datadir server_setting "$@"); DATADIR=${DATADIR%/}
  SOCKET=$(SERVER_KEY=socket server_setting "$@")
  [ -n "$DATADIR" ] && [ -n "$SOCKET" ] || die "$1 --verbose --help names no datadir or socket"
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$DATADIR" "$(dirname "$SOCKET")"
    find "$DATADIR" "$(dirname "$SOCKET")" \! -user mysql -exec chown mysql:mysql '{}' +
    exec setpriv --reuid=mysql --regid=mysql --init-groups -- "${BASH_SOURCE[0]}" "$@"
  fi
  [ -w "$DATADIR" ] || die "$DATADIR is not writable by uid $(id -u): give the volume to it (fsGroup) or start as root"
  if [ ! -d "$DATADIR/mysql" ]; then
    first_start "$@"
  fi
  exec "$@"
}

main "$@"
