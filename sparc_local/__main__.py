from sparc_local.cli import app

app(prog_name="sparc-local")
