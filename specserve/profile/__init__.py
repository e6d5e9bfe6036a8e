"""Deployment profile: load, validate, render and launch one SGLang deployment."""

from specserve.profile.loader import ProfileError, load_profile
from specserve.profile.model import Profile

__all__ = ["Profile", "ProfileError", "load_profile"]
