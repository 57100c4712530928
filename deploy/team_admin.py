"""The team server's chores that need a database driver or HTTP (deploy/team-server.sh calls it; stdlib, mlflow's
requests and psycopg only). Secrets come from files or the environment, never from the command line.

    python3 deploy/team_admin.py role ROLE DB PASSWORD_FILE     a PostgreSQL role owning DB (PGHOST, PGPORT, PGPASSFILE)
    python3 deploy/team_admin.py user add|remove NAME DIR       an MLflow user; its credentials in DIR/NAME.credentials
    python3 deploy/team_admin.py check URL NAME...              each NAME (the Host a GPU host sends) is served to
                                                                the admin and refused without credentials
    python3 deploy/team_admin.py new-admin|password FILE        the admin's credentials file: made, read
The admin's credentials are read from $PERFLAB_ADMIN_CREDENTIALS (an MLflow credentials file).
"""

from __future__ import annotations

import configparser
import os
import secrets
import sys
from pathlib import Path

import requests

SECTION = "mlflow"  # MLflow's own credentials file (~/.mlflow/credentials): [mlflow] mlflow_tracking_username = ...
USER_KEY, PASSWORD_KEY = "mlflow_tracking_username", "mlflow_tracking_password"
PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"  # host-checked and authenticated, unlike /health


def read_credentials(path: Path) -> tuple[str, str]:
    parser = configparser.ConfigParser()
    parser.read(path)
    return parser[SECTION][USER_KEY], parser[SECTION][PASSWORD_KEY]


def write_credentials(path: Path, user: str, password: str) -> None:
    """An MLflow credentials file, readable by its owner only (created so: never a moment world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"[{SECTION}]\n{USER_KEY} = {user}\n{PASSWORD_KEY} = {password}\n")


def _admin() -> tuple[str, str]:
    return read_credentials(Path(os.environ["PERFLAB_ADMIN_CREDENTIALS"]))


def role(name: str, db: str, password_file: str) -> None:
    """Role ``name`` (login, its password SCRAM-hashed here: the server never sees it in a statement it could
    log) and database ``db`` it owns."""
    import psycopg
    from psycopg import sql

    password = Path(password_file).read_text().strip()
    with psycopg.connect(dbname="postgres", user="perflab", autocommit=True) as conn:
        verifier = conn.pgconn.encrypt_password(password.encode(), name.encode(), b"scram-sha-256").decode()
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), sql.Literal(verifier)))
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(name)))
        # PostgreSQL grants CONNECT on a new database to PUBLIC: only its owner (and superusers) get in
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(db)))


def user(action: str, name: str, directory: str, url: str) -> None:
    """Add (a fresh random password) or remove an MLflow user through the server's auth API."""
    path = Path(directory) / f"{name}.credentials"
    if action == "add":
        password = secrets.token_urlsafe(24)
        r = requests.post(f"{url}/api/2.0/mlflow/users/create", json={"username": name, "password": password},
                          auth=_admin(), timeout=30)  # fmt: skip
        if r.status_code != 200:
            sys.exit(f"team-server: user {name!r} not created: {r.status_code} {r.text[:200]}")
        write_credentials(path, name, password)
        print(f"team-server: user {name} created; their credentials: {path} (copy to ~/.mlflow/credentials, mode 600)")
    elif action == "remove":
        r = requests.delete(f"{url}/api/2.0/mlflow/users/delete", json={"username": name}, auth=_admin(), timeout=30)
        if r.status_code != 200:
            sys.exit(f"team-server: user {name!r} not removed: {r.status_code} {r.text[:200]}")
        path.unlink(missing_ok=True)
        print(f"team-server: user {name} removed")
    else:
        sys.exit(f"team-server: user add|remove NAME, not {action!r}")


def check(url: str, names: list[str]) -> None:
    """Each name as a GPU host sends it (``Host: name:port``): served with the admin's credentials, refused
    without; a name MLflow's host check refuses is said with the setting that admits it."""
    port = url.rsplit(":", 1)[1]
    problems = []
    for name in names:
        host = {"Host": f"{name}:{port}"}
        try:
            served = requests.get(url + PROBE, headers=host, auth=_admin(), timeout=5).status_code
            anonymous = requests.get(url + PROBE, headers=host, timeout=5).status_code
        except requests.RequestException as exc:
            sys.exit(f"{name}: {type(exc).__name__}")
        if served == 403 and anonymous == 403:
            problems.append(f"{name}: refused by MLflow's host check (add it to PERFLAB_ALLOWED_HOSTS)")
        elif served != 200:
            problems.append(f"{name}: {served} with the admin's credentials")
        elif anonymous not in (401, 403):
            problems.append(f"{name}: {anonymous} without credentials (authentication is off)")
    if problems:
        sys.exit("; ".join(problems))


def main(argv: list[str]) -> None:
    match argv:
        case ["role", name, db, password_file]:
            role(name, db, password_file)
        case ["user", action, name, directory, url]:
            user(action, name, directory, url)
        case ["check", url, *names] if names:
            check(url, names)
        case ["new-admin", path]:  # the server's first start: MLflow creates the admin with this password
            write_credentials(Path(path), "admin", secrets.token_urlsafe(24))
        case ["password", path]:  # for the server's environment (bash reads it into a variable)
            print(read_credentials(Path(path))[1])
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
