"""NIXL's logging (nixl.logging): the "nixl" logger, INFO and up on stdout as NIXL
prints them, NIXL_LOG_LEVEL (TRACE, DEBUG, INFO, WARN, ERROR, FATAL) to change it.

get_logger(name) is "nixl." and the module's name without leading underscores.
"""
import logging
import os
import sys

_configured = False
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
           "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def set_log_level_by_env(nixl_logger: logging.Logger) -> None:
    level = os.getenv("NIXL_LOG_LEVEL")
    if not level:
        return
    if level.upper() in _LEVELS:
        nixl_logger.setLevel(_LEVELS[level.upper()])
        nixl_logger.info("Log level set to %s from NIXL_LOG_LEVEL environment variable",
                         level.upper())
    else:
        nixl_logger.warning("Invalid NIXL_LOG_LEVEL value '%s'. Using configuration default.",
                            level)


def setup_logging() -> None:
    global _configured
    if _configured:
        return
    nixl_logger = logging.getLogger("nixl")
    if not nixl_logger.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter(
            "%(asctime)s NIXL %(levelname)-7s %(filename)s:%(lineno)d %(message)s",
            "%Y-%m-%d %H:%M:%S"))
        nixl_logger.addHandler(h)
        nixl_logger.setLevel(logging.INFO)
        nixl_logger.propagate = False
    set_log_level_by_env(nixl_logger)
    _configured = True


def get_logger(name: str) -> logging.Logger:
    setup_logging()
    return logging.getLogger(f"nixl.{name.lstrip('_')}")
