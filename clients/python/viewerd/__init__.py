"""viewerd client: thumbnails and renditions from the viewerd daemon over its Unix socket.

>>> import viewerd
>>> with viewerd.Client() as client:
...     thumb = client.render("/home/me/Pictures/a.jpg", 256, 256)
>>> thumb.width, thumb.height, len(thumb.data)
"""
from .aio import AsyncClient, AsyncLayoutRequest, AsyncRenderRequest
from .client import Cancelled, Client, LayoutRequest, RenderRequest
from .pager import Pager
from .errors import ERROR_NAMES, ConnectionLost, DaemonUnavailable, UntrustedSocket, ViewerError
from .protocol import (Capability, Colour, Crop, Delivery, Fit, Format, InfoReply, LayoutItem, LayoutItems, LayoutOrder, MediaKind,
                       Preview, Priority, Region, Result, TileAddress, Welcome)
from .pyramid import Tile, TilePyramid
from .socketpath import default_socket

__all__ = ["AsyncClient", "AsyncLayoutRequest", "AsyncRenderRequest", "Cancelled", "Client", "LayoutRequest", "RenderRequest", "ERROR_NAMES",
           "ConnectionLost", "DaemonUnavailable", "UntrustedSocket", "ViewerError", "Capability", "Colour", "Crop", "Delivery", "Fit",
           "Format", "InfoReply", "LayoutItem", "LayoutItems", "LayoutOrder", "MediaKind", "Pager", "Preview", "Priority", "Region", "Result", "Tile", "TileAddress",
           "TilePyramid", "Welcome", "default_socket"]
__version__ = "0.1.0"
