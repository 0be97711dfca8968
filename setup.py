"""setuptools reads everything from pyproject.toml; this file only puts the migrations in
the wheel. alembic/ and alembic.ini live at the top of the checkout, outside the `app`
package, so a wheel of `app` alone could not migrate: build_py copies them into the built
package as app/_migrations/, where app/db/migrate.py looks when there is no checkout
around it (an installed `navi`). An editable install (make install) runs from the
checkout and copies nothing."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithMigrations(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "app" / "_migrations"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(
            HERE / "alembic",
            target / "alembic",
            ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"),
        )
        shutil.copy2(HERE / "alembic.ini", target / "alembic.ini")


setup(cmdclass={"build_py": BuildPyWithMigrations})
