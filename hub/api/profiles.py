"""REST: ``/api/v1/profiles`` - apply (create or update), list, describe, delete
ComputeProfiles (``hub.profiles``)."""

from __future__ import annotations

from fastapi import APIRouter

from fuyao.computeprofile import ComputeProfile, ProfileView
from fuyao.errors import InvalidInput
from hub.api.deps import HubDep

router = APIRouter(prefix="/api/v1", tags=["profiles"])


@router.put("/profiles/{name}", response_model=ProfileView)
async def apply_profile(name: str, profile: ComputeProfile, hub: HubDep) -> ProfileView:
    """Create or update a profile; its version moves by one when the content changed."""
    async with hub.audited("profile.apply", name) as notes:
        if profile.name != name:
            raise InvalidInput(f"profile name {profile.name!r} in the body is not {name!r}")
        view = await hub.profiles.apply(profile)
        notes.append(f"version {view.version}")
    return view


@router.get("/profiles", response_model=list[ProfileView])
async def list_profiles(hub: HubDep) -> list[ProfileView]:
    """Every profile, by name."""
    return hub.profiles.views()


@router.get("/profiles/{name}", response_model=ProfileView)
async def describe_profile(name: str, hub: HubDep) -> ProfileView:
    """One profile, with the queued tasks that use it."""
    return hub.profiles.view(name)


@router.delete("/profiles/{name}")
async def delete_profile(name: str, hub: HubDep) -> dict[str, str]:
    """Delete a profile; 409 naming the queued tasks that still use it."""
    async with hub.audited("profile.delete", name):
        await hub.profiles.delete(name)
    return {"deleted": name}
