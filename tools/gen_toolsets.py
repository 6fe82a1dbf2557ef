#!/usr/bin/env python3
"""Generate the bundled sample tool sets and the default system prompt.

Usage: python3 tools/gen_toolsets.py [repo_root]

Writes (relative to repo_root, default: the parent of this script's directory):
  resources/toolsets/tools_{5,10,20,50,100}.json
  resources/toolsets/tools_unicode.json
  resources/system_prompt.txt

Python 3 standard library only. Deterministic: the tool definitions below are literal
data, and the output depends on nothing else. The sets are nested: tools_5 is the first
5 tools of TOOLS, tools_10 the first 10, and so on, so each smaller set is a subset of
every larger one. All tools are synthetic examples written for ContextCache.

The first 20 tools are sized so that the Qwen3 system turn (official tools template) with the
default system prompt is about 2,950 tokens (the paper reports 2,851 prefix tokens for its 20
tools). json.dumps of the 20 tools is ~10,300 characters; this schema JSON averages ~3.5
characters per Qwen3 token.
Tools 1-20 are ASCII-only; a few descriptions among tools 21-100 contain non-ASCII
characters (degree sign, euro sign, a Japanese city name).
"""

import json
import os
import re
import sys

SYSTEM_PROMPT = (
    "You are a helpful assistant with access to a set of tools. "
    "When a request needs live data or an action, call the single most appropriate tool "
    "with arguments that follow its schema exactly; otherwise answer directly and concisely. "
    "Never invent tool results."
)


# ---------------------------------------------------------------- schema helpers
# Key order in the output follows insertion order: type, description, then the
# keyword arguments in the order given (enum, default, minimum, ...).

def S(desc, **kw):
    return {"type": "string", "description": desc, **kw}


def I(desc, **kw):
    return {"type": "integer", "description": desc, **kw}


def N(desc, **kw):
    return {"type": "number", "description": desc, **kw}


def B(desc, **kw):
    return {"type": "boolean", "description": desc, **kw}


def A(desc, items, **kw):
    return {"type": "array", "description": desc, "items": items, **kw}


def O(props, required=None, desc=None, **kw):
    d = {"type": "object"}
    if desc:
        d["description"] = desc
    d["properties"] = props
    if required:
        d["required"] = list(required)
    d.update(kw)
    return d


def T(name, desc, props, required=()):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": props,
                "required": list(required),
            },
        },
    }


CURRENCY = S("ISO 4217 currency code, e.g. USD.", pattern="^[A-Z]{3}$")
DATE = lambda d: S(d, format="date")
DATETIME = lambda d: S(d, format="date-time")


# ---------------------------------------------------------------- tools 1-20 (ASCII only)
TOOLS = [
    T("get_current_weather",
      "Get the current weather for a location.",
      {
          "location": S("City and region, e.g. 'Austin, TX'."),
          "units": S("Unit system.", enum=["metric", "imperial"], default="metric"),
      },
      ["location"]),

    T("create_calendar_event",
      "Create an event in the user's calendar and optionally invite attendees.",
      {
          "title": S("Event title."),
          "start": DATETIME("Start time, ISO 8601 with offset."),
          "end": DATETIME("End time, ISO 8601 with offset."),
          "attendees": A("People to invite.", O({
              "email": S("Attendee email."),
              "optional": B("Attendance is optional."),
          }, ["email"])),
      },
      ["title", "start", "end"]),

    T("send_email",
      "Send an email from the user's account. Only call after the user confirmed it.",
      {
          "to": A("Recipient addresses.", S("Email address."), minItems=1),
          "subject": S("Subject line."),
          "body": S("Message body."),
      },
      ["to", "subject", "body"]),

    T("search_flights",
      "Search flights between two airports and return offers sorted by price.",
      {
          "origin": S("Departure airport IATA code, e.g. SFO."),
          "destination": S("Arrival airport IATA code, e.g. LHR."),
          "departure_date": DATE("Departure date."),
          "return_date": DATE("Return date; omit for one-way."),
          "adults": I("Number of adult passengers.", minimum=1, maximum=9, default=1),
          "cabin_class": S("Cabin class.", enum=["economy", "premium_economy", "business", "first"],
                           default="economy"),
      },
      ["origin", "destination", "departure_date"]),

    T("convert_currency",
      "Convert an amount between currencies at the latest mid-market rate.",
      {
          "amount": N("Amount to convert.", minimum=0),
          "from_currency": S("Source ISO 4217 code, e.g. USD."),
          "to_currency": S("Target ISO 4217 code, e.g. JPY."),
      },
      ["amount", "from_currency", "to_currency"]),

    # ---- 6-10
    T("lookup_order_status",
      "Look up an order's status, items and shipment tracking numbers.",
      {
          "order_id": S("Order number, e.g. 'ORD-104392'."),
          "customer_email": S("Order email, for guest checkouts."),
      },
      ["order_id"]),

    T("process_refund",
      "Issue a full or partial refund for an order.",
      {
          "order_id": S("Order number to refund."),
          "line_items": A("Items to refund; omit for the whole order.", O({
              "sku": S("Item SKU."),
              "quantity": I("Units to refund.", minimum=1),
          }, ["sku", "quantity"])),
          "reason": S("Reason code.", enum=["damaged", "not_received", "wrong_item", "other"]),
      },
      ["order_id", "reason"]),

    T("execute_python_code",
      "Run Python 3 code in a sandbox without network access; returns stdout and stderr.",
      {
          "code": S("Python source to execute."),
          "timeout_seconds": N("Time limit in seconds.", minimum=0.5, maximum=60, default=10),
      },
      ["code"]),

    T("run_sql_query",
      "Run a read-only SQL query on the analytics warehouse and return rows as JSON.",
      {
          "query": S("A single SELECT statement."),
          "database": S("Target database.", enum=["sales", "marketing", "product", "finance"]),
          "max_rows": I("Maximum rows to return.", minimum=1, maximum=10000, default=500),
      },
      ["query", "database"]),

    T("detect_language",
      "Detect the language of a text and return BCP 47 codes with confidence scores.",
      {
          "text": S("Text to analyse."),
          "top_k": I("Number of candidate languages.", minimum=1, maximum=5, default=1),
      },
      ["text"]),

    # ---- 11-20
    T("book_hotel",
      "Reserve a hotel room from a search offer.",
      {
          "offer_id": S("Offer id from a hotel search."),
          "check_in": DATE("Check-in date."),
          "check_out": DATE("Check-out date."),
          "guest": O({
              "first_name": S("Given name."),
              "last_name": S("Family name."),
          }, ["first_name", "last_name"], desc="Lead guest."),
      },
      ["offer_id", "check_in", "check_out", "guest"]),

    T("geocode_address",
      "Convert an address or place name to coordinates.",
      {
          "query": S("Address or place name."),
      },
      ["query"]),

    T("get_stock_quote",
      "Get the latest price, change and volume for a stock or ETF.",
      {
          "symbol": S("Ticker symbol, e.g. AAPL."),
          "exchange": S("Exchange code to disambiguate, e.g. XNAS."),
      },
      ["symbol"]),

    T("translate_text",
      "Translate text into another language; the source language is auto-detected.",
      {
          "text": S("Text to translate."),
          "target_language": S("Target language code, e.g. 'fr'."),
      },
      ["text", "target_language"]),

    T("create_support_ticket",
      "Open a customer support ticket in the given queue.",
      {
          "subject": S("One-line summary."),
          "description": S("Details and steps to reproduce."),
          "priority": S("Priority.", enum=["low", "normal", "high", "urgent"], default="normal"),
          "queue": S("Queue.", enum=["billing", "technical", "shipping", "account"]),
      },
      ["subject", "description", "queue"]),

    T("check_inventory",
      "Check stock levels for products across warehouses.",
      {
          "skus": A("SKUs to check.", S("SKU."), minItems=1, maxItems=100),
          "warehouse_id": S("Limit to one warehouse; default all."),
      },
      ["skus"]),

    T("crm.search_contacts",
      "Search CRM contacts by name, company or email.",
      {
          "query": S("Free-text search."),
          "lifecycle_stage": S("Filter by stage.", enum=["lead", "prospect", "customer", "churned"]),
          "page_size": I("Results per page.", minimum=1, maximum=100, default=25),
      },
      ["query"]),

    T("track_shipment",
      "Get tracking events and estimated delivery for a parcel.",
      {
          "tracking_number": S("Carrier tracking number."),
          "carrier": S("Carrier; omit to auto-detect.", enum=["ups", "fedex", "usps", "dhl", "other"]),
      },
      ["tracking_number"]),

    T("set_reminder",
      "Create a reminder that notifies the user at a given time, optionally repeating.",
      {
          "text": S("What to remind about."),
          "remind_at": DATETIME("When to notify, ISO 8601."),
          "repeat": S("Repeat rule.", enum=["none", "daily", "weekly", "monthly"], default="none"),
      },
      ["text", "remind_at"]),

    T("search_news",
      "Search recent news articles by keyword.",
      {
          "query": S("Keywords or a quoted phrase."),
          "max_results": I("Number of articles.", minimum=1, maximum=50, default=10),
      },
      ["query"]),
]

# ---------------------------------------------------------------- tools 21-50
TOOLS += [
    T("get_weather_forecast",
      "Get a daily or hourly weather forecast for up to 14 days.",
      {
          "location": S("City and region, or 'lat,lng'."),
          "days": I("Number of days to forecast.", minimum=1, maximum=14, default=5),
          "granularity": S("Forecast step.", enum=["daily", "hourly"], default="daily"),
          "units": S("Unit system; metric gives °C and km/h.", enum=["metric", "imperial"],
                     default="metric"),
      },
      ["location"]),

    T("list_calendar_events",
      "List events in the user's calendars within a time range.",
      {
          "time_min": DATETIME("Start of the range, inclusive."),
          "time_max": DATETIME("End of the range, exclusive."),
          "calendar_ids": A("Calendars to read; default the primary calendar.", S("Calendar id.")),
          "query": S("Only events whose title or notes contain this text."),
          "max_results": I("Maximum events.", minimum=1, maximum=250, default=50),
      },
      ["time_min", "time_max"]),

    T("search_emails",
      "Search the user's mailbox and return matching message summaries.",
      {
          "query": S("Search expression, e.g. 'from:alice subject:invoice'."),
          "folder": S("Folder to search.", enum=["inbox", "sent", "archive", "all"], default="inbox"),
          "unread_only": B("Only unread messages.", default=False),
          "limit": I("Maximum messages.", minimum=1, maximum=100, default=20),
      },
      ["query"]),

    T("search_hotels",
      "Find hotel offers in a city for given dates and party size.",
      {
          "city": S("City name, e.g. 'Lisbon'."),
          "check_in": DATE("Check-in date."),
          "check_out": DATE("Check-out date."),
          "guests": I("Number of guests.", minimum=1, maximum=8, default=2),
          "max_price_per_night": N("Upper price limit per night in the given currency.", minimum=0),
          "currency": S("ISO 4217 currency for prices.", default="USD"),
          "min_rating": N("Minimum guest rating from 0 to 10.", minimum=0, maximum=10),
          "amenities": A("Required amenities.", S("Amenity.", enum=[
              "wifi", "parking", "pool", "gym", "breakfast", "pet_friendly"])),
      },
      ["city", "check_in", "check_out"]),

    T("find_nearby_places",
      "Find points of interest near a location, such as restaurants, pharmacies or fuel stations.",
      {
          "location": S("Address or 'lat,lng' to search around."),
          "category": S("Place category.", enum=["restaurant", "cafe", "pharmacy", "hospital",
                                                   "fuel", "atm", "supermarket", "parking"]),
          "radius_m": I("Search radius in metres.", minimum=50, maximum=50000, default=1500),
          "open_now": B("Only places open now.", default=False),
          "keyword": S("Extra keyword, e.g. 'vegan'."),
      },
      ["location", "category"]),

    T("get_exchange_rate_history",
      "Get daily exchange rates between two currencies over a date range.",
      {
          "base": S("Base ISO 4217 code, e.g. EUR."),
          "quote": S("Quote ISO 4217 code, e.g. USD."),
          "start_date": DATE("First day of the range."),
          "end_date": DATE("Last day of the range; at most 366 days after start_date."),
      },
      ["base", "quote", "start_date", "end_date"]),

    T("get_stock_history",
      "Get historical OHLCV price bars for a ticker.",
      {
          "symbol": S("Ticker symbol."),
          "interval": S("Bar size.", enum=["1m", "5m", "1h", "1d", "1wk"], default="1d"),
          "start": DATE("First date."),
          "end": DATE("Last date; default today."),
          "adjusted": B("Adjust for splits and dividends.", default=True),
      },
      ["symbol", "start"]),

    T("get_directions",
      "Get directions between two places with distance, duration and steps.",
      {
          "origin": S("Start address or 'lat,lng'."),
          "destination": S("End address or 'lat,lng'."),
          "mode": S("Travel mode.", enum=["driving", "walking", "bicycling", "transit"],
                    default="driving"),
      },
      ["origin", "destination"]),

    T("read_file",
      "Read a text file from the user's workspace.",
      {
          "path": S("Path relative to the workspace root."),
          "encoding": S("Text encoding.", default="utf-8"),
          "start_line": I("First line to return, 1-based.", minimum=1, default=1),
          "max_lines": I("Maximum lines to return.", minimum=1, maximum=5000, default=400),
      },
      ["path"]),

    T("write_file",
      "Create or overwrite a text file in the user's workspace.",
      {
          "path": S("Path relative to the workspace root."),
          "content": S("Full file content."),
          "overwrite": B("Replace the file if it exists.", default=False),
          "create_dirs": B("Create missing parent directories.", default=True),
      },
      ["path", "content"]),

    T("list_directory",
      "List files and folders in a workspace directory.",
      {
          "path": S("Directory path; '.' for the workspace root.", default="."),
          "recursive": B("Include subdirectories.", default=False),
          "pattern": S("Glob filter, e.g. '*.py'."),
          "include_hidden": B("Include dotfiles.", default=False),
      },
      []),

    T("describe_table",
      "Describe a warehouse table: columns, types, row count and partitioning.",
      {
          "database": S("Database.", enum=["sales", "marketing", "product", "finance"]),
          "table": S("Table name, optionally schema-qualified."),
          "sample_rows": I("Number of sample rows to include.", minimum=0, maximum=20, default=0),
      },
      ["database", "table"]),

    T("update_ticket",
      "Update a support ticket's status, assignee or priority, or add a comment.",
      {
          "ticket_id": S("Ticket id, e.g. 'SUP-2291'."),
          "status": S("New status.", enum=["open", "pending", "on_hold", "solved", "closed"]),
          "assignee_id": S("Agent to assign."),
          "priority": S("New priority.", enum=["low", "normal", "high", "urgent"]),
          "comment": O({
              "body": S("Comment text."),
              "public": B("Visible to the customer.", default=False),
          }, ["body"], desc="Comment to add."),
      },
      ["ticket_id"]),

    T("crm.create_lead",
      "Create a sales lead in the CRM.",
      {
          "first_name": S("Given name."),
          "last_name": S("Family name."),
          "email": S("Email address."),
          "company": S("Company name."),
          "source": S("Lead source.", enum=["website", "referral", "event", "cold_outreach", "partner"]),
          "estimated_value": N("Estimated deal value in USD.", minimum=0),
          "notes": S("Free-text notes."),
      },
      ["last_name", "email"]),

    T("crm.update_deal_stage",
      "Move a CRM deal to another pipeline stage.",
      {
          "deal_id": S("Deal id."),
          "stage": S("Target stage.", enum=["qualification", "demo", "proposal", "negotiation",
                                             "closed_won", "closed_lost"]),
          "probability": N("Win probability from 0 to 1.", minimum=0, maximum=1),
          "close_date": DATE("Expected close date."),
          "lost_reason": S("Required when stage is closed_lost."),
      },
      ["deal_id", "stage"]),

    T("create_shipping_label",
      "Buy a shipping label for a parcel and return the label PDF URL and tracking number.",
      {
          "carrier": S("Carrier.", enum=["ups", "fedex", "usps", "dhl"]),
          "service_level": S("Service.", enum=["ground", "express", "overnight"], default="ground"),
          "from_address_id": S("Saved sender address id."),
          "to_address": O({
              "name": S("Recipient name."),
              "street": S("Street and number."),
              "city": S("City."),
              "postal_code": S("Postal code."),
              "country": S("ISO 3166-1 alpha-2 code."),
          }, ["name", "street", "city", "postal_code", "country"], desc="Recipient address."),
          "parcel": O({
              "weight_kg": N("Weight in kilograms.", minimum=0.01, maximum=70),
              "length_cm": N("Length in cm.", minimum=1),
              "width_cm": N("Width in cm.", minimum=1),
              "height_cm": N("Height in cm.", minimum=1),
          }, ["weight_kg"], desc="Parcel dimensions."),
      },
      ["carrier", "from_address_id", "to_address", "parcel"]),

    T("list_reminders",
      "List the user's pending reminders.",
      {
          "include_completed": B("Also list completed reminders.", default=False),
          "due_before": DATETIME("Only reminders due before this time."),
      },
      []),

    T("convert_units",
      "Convert a quantity between units of length, mass, volume, temperature, speed or area.",
      {
          "value": N("Quantity to convert."),
          "from_unit": S("Source unit symbol, e.g. 'mi', 'lb', 'degF'."),
          "to_unit": S("Target unit symbol, e.g. 'km', 'kg', 'degC'."),
          "precision": I("Decimal places in the result.", minimum=0, maximum=12, default=4),
      },
      ["value", "from_unit", "to_unit"]),

    T("web_search",
      "Search the web and return titles, URLs and snippets.",
      {
          "query": S("Search query."),
          "num_results": I("Number of results.", minimum=1, maximum=20, default=5),
          "safe_search": S("Safe search level.", enum=["off", "moderate", "strict"], default="moderate"),
          "region": S("Region code for localised results, e.g. 'us-en'."),
          "time_range": S("Recency filter.", enum=["any", "day", "week", "month", "year"], default="any"),
      },
      ["query"]),

    T("get_employee_profile",
      "Get an employee's HR profile: title, department, manager, location and start date.",
      {
          "employee_id": S("Employee id, e.g. 'E10442'."),
          "fields": A("Fields to return; default all non-sensitive fields.", S("Field.", enum=[
              "title", "department", "manager", "location", "start_date", "phone", "email"])),
      },
      ["employee_id"]),

    T("submit_time_off_request",
      "Submit a time-off request for the current user for manager approval.",
      {
          "type": S("Leave type.", enum=["vacation", "sick", "parental", "unpaid", "other"]),
          "start_date": DATE("First day off."),
          "end_date": DATE("Last day off."),
          "half_day": S("Half-day option for single-day requests.", enum=["none", "morning", "afternoon"],
                        default="none"),
          "comment": S("Note for the approver."),
      },
      ["type", "start_date", "end_date"]),

    T("create_payment_link",
      "Create a hosted payment link for a one-off charge.",
      {
          "amount": N("Amount in major units, e.g. 19.99.", minimum=0.5),
          "currency": S("ISO 4217 code.", default="USD"),
          "description": S("What the customer is paying for."),
          "customer_email": S("Prefill the customer's email."),
          "expires_in_hours": I("Link lifetime.", minimum=1, maximum=720, default=72),
          "allow_promotion_codes": B("Let the customer enter a promo code.", default=False),
      },
      ["amount", "description"]),

    T("list_transactions",
      "List card and bank transactions for an account, newest first.",
      {
          "account_id": S("Account id."),
          "from_date": DATE("Earliest booking date."),
          "to_date": DATE("Latest booking date."),
          "min_amount": N("Only transactions with an absolute amount at least this."),
          "category": S("Spending category.", enum=["groceries", "travel", "dining", "utilities",
                                                      "shopping", "transfer", "income", "other"]),
          "limit": I("Maximum rows.", minimum=1, maximum=500, default=50),
      },
      ["account_id"]),

    T("set_thermostat",
      "Set the target temperature and mode of a smart thermostat.",
      {
          "device_id": S("Thermostat id."),
          "target_temperature": N("Target temperature in the device's unit; 0.5 steps.",
                                  minimum=5, maximum=35, multipleOf=0.5),
          "mode": S("HVAC mode.", enum=["heat", "cool", "auto", "off", "eco"]),
          "hold_until": DATETIME("Keep this setting until; omit for permanent hold."),
      },
      ["device_id"]),

    T("control_lights",
      "Turn smart lights on or off, or change brightness and colour.",
      {
          "room": S("Room name, e.g. 'living room'; or use light_ids."),
          "light_ids": A("Specific light ids.", S("Light id.")),
          "power": S("Power state.", enum=["on", "off", "toggle"]),
          "brightness": I("Brightness percent.", minimum=1, maximum=100),
          "color_temperature_k": I("White colour temperature in kelvin.", minimum=2000, maximum=6500),
          "transition_ms": I("Fade duration.", minimum=0, maximum=60000, default=400),
      },
      []),

    T("play_music",
      "Play a song, album, artist or playlist on the user's speaker.",
      {
          "query": S("What to play, e.g. 'Kind of Blue' or 'lo-fi beats'."),
          "type": S("Type of item.", enum=["track", "album", "artist", "playlist"], default="track"),
          "device": S("Speaker or device name; default the active device."),
          "shuffle": B("Shuffle playback.", default=False),
          "volume": I("Volume percent.", minimum=0, maximum=100),
      },
      ["query"]),

    T("run_analytics_report",
      "Run an aggregated analytics report over product events.",
      {
          "metrics": A("Metrics to compute.", S("Metric.", enum=[
              "active_users", "sessions", "conversions", "revenue", "retention_d7"]), minItems=1),
          "dimensions": A("Group-by dimensions.", S("Dimension.", enum=[
              "date", "country", "platform", "campaign", "plan"])),
          "start_date": DATE("First day."),
          "end_date": DATE("Last day."),
          "filters": A("Conditions combined with AND.", O({
              "dimension": S("Dimension to filter."),
              "operator": S("Comparison.", enum=["eq", "neq", "in", "contains"]),
              "values": A("Values to compare with.", S("Value.")),
          }, ["dimension", "operator", "values"])),
          "limit": I("Maximum rows.", minimum=1, maximum=10000, default=1000),
      },
      ["metrics", "start_date", "end_date"]),

    T("get_flight_status",
      "Get real-time status, gates and delays for a flight.",
      {
          "flight_number": S("Airline code and number, e.g. 'BA117'."),
          "date": DATE("Scheduled departure date (local)."),
      },
      ["flight_number", "date"]),

    T("slack.post_message",
      "Post a message to a Slack channel or thread.",
      {
          "channel": S("Channel name such as '#ops' or a channel id."),
          "text": S("Message text; Slack mrkdwn supported."),
          "thread_ts": S("Timestamp of the parent message to reply in a thread."),
          "unfurl_links": B("Expand link previews.", default=True),
      },
      ["channel", "text"]),

    T("create_invoice",
      "Create and optionally send an invoice to a customer.",
      {
          "customer_id": S("Billing customer id."),
          "currency": S("ISO 4217 code, e.g. EUR for €.", default="USD"),
          "items": A("Invoice lines.", O({
              "description": S("Line description."),
              "quantity": N("Quantity.", minimum=0.01, default=1),
              "unit_price": N("Price per unit.", minimum=0),
              "tax_rate": N("Tax rate as a fraction, e.g. 0.2.", minimum=0, maximum=1, default=0),
          }, ["description", "unit_price"]), minItems=1),
          "due_days": I("Days until due.", minimum=0, maximum=120, default=30),
          "send": B("Email the invoice now.", default=False),
      },
      ["customer_id", "items"]),
]

# ---------------------------------------------------------------- tools 51-100
TOOLS += [
    T("get_air_quality",
      "Get the current air quality index and pollutant concentrations for a location.",
      {
          "location": S("City or 'lat,lng'."),
          "standard": S("AQI scale.", enum=["us_epa", "eu_caqi", "cn_mep"], default="us_epa"),
          "pollutants": A("Pollutants to include.", S("Pollutant.", enum=["pm25", "pm10", "o3", "no2", "so2", "co"])),
      },
      ["location"]),

    T("get_local_time",
      "Get the current local time and UTC offset for a city or IANA time zone, e.g. "
      "'Asia/Tokyo' or '東京'.",
      {
          "place": S("City name or IANA time zone."),
          "format": S("Output format.", enum=["iso8601", "12h", "24h"], default="iso8601"),
      },
      ["place"]),

    T("convert_time_zone",
      "Convert a date and time from one time zone to another.",
      {
          "datetime": S("Local date-time without offset, e.g. '2025-03-30 09:00'."),
          "from_zone": S("Source IANA time zone."),
          "to_zones": A("Target IANA time zones.", S("Time zone."), minItems=1, maxItems=10),
      },
      ["datetime", "from_zone", "to_zones"]),

    T("calculate",
      "Evaluate an arithmetic expression exactly; supports +, -, *, /, ^, parentheses and "
      "common functions.",
      {
          "expression": S("Expression, e.g. '(1.5e3 + 20) * sqrt(2)'."),
          "precision": I("Significant digits.", minimum=1, maximum=50, default=15),
      },
      ["expression"]),

    T("search_wikipedia",
      "Search Wikipedia and return article summaries.",
      {
          "query": S("Search terms."),
          "language": S("Wikipedia language edition, e.g. 'en', 'de', 'ja'.", default="en"),
          "results": I("Number of articles.", minimum=1, maximum=10, default=3),
          "summary_sentences": I("Sentences per summary.", minimum=1, maximum=10, default=3),
      },
      ["query"]),

    T("search_recipes",
      "Find recipes by ingredients, cuisine or dietary needs.",
      {
          "query": S("Dish or keywords."),
          "include_ingredients": A("Ingredients that must be used.", S("Ingredient.")),
          "exclude_ingredients": A("Ingredients to avoid.", S("Ingredient.")),
          "diet": S("Diet.", enum=["none", "vegetarian", "vegan", "gluten_free", "keto", "halal"],
                    default="none"),
          "max_minutes": I("Maximum total cooking time.", minimum=5, maximum=600),
          "servings": I("Scale quantities to this many servings.", minimum=1, maximum=24),
      },
      []),

    T("get_nutrition_facts",
      "Get calories and macronutrients for foods.",
      {
          "items": A("Foods with amounts.", O({
              "food": S("Food name, e.g. 'rolled oats'."),
              "quantity": N("Amount.", minimum=0),
              "unit": S("Unit.", enum=["g", "ml", "cup", "tbsp", "tsp", "piece", "oz"]),
          }, ["food", "quantity", "unit"]), minItems=1),
      },
      ["items"]),

    T("get_movie_showtimes",
      "List cinema showtimes for a movie or a cinema.",
      {
          "movie_title": S("Movie title; omit to list everything at the cinema."),
          "cinema_id": S("Cinema id; omit to search near location."),
          "location": S("City or postcode when no cinema_id is given."),
          "date": DATE("Show date; default today."),
          "format": S("Screen format.", enum=["any", "2d", "3d", "imax", "dolby"], default="any"),
      },
      []),

    T("reserve_restaurant",
      "Book a table at a restaurant.",
      {
          "restaurant_id": S("Restaurant id from a place search."),
          "date": DATE("Reservation date."),
          "time": S("Local time, HH:MM in 24-hour format.", pattern="^[0-2][0-9]:[0-5][0-9]$"),
          "party_size": I("Number of diners.", minimum=1, maximum=20),
          "seating": S("Seating preference.", enum=["any", "indoor", "outdoor", "bar"], default="any"),
          "notes": S("Allergies or occasion."),
      },
      ["restaurant_id", "date", "time", "party_size"]),

    T("request_ride",
      "Request a ride-hailing car from pickup to drop-off.",
      {
          "pickup": S("Pickup address or 'lat,lng'."),
          "dropoff": S("Drop-off address or 'lat,lng'."),
          "ride_type": S("Vehicle class.", enum=["standard", "xl", "premium", "green"], default="standard"),
          "seats": I("Seats needed.", minimum=1, maximum=6, default=1),
          "scheduled_for": DATETIME("Schedule for later; omit to request now."),
      },
      ["pickup", "dropoff"]),

    T("search_train_connections",
      "Search rail connections between two stations, e.g. '東京' (Tokyo) to 'Kyoto'.",
      {
          "from_station": S("Departure station name or code."),
          "to_station": S("Arrival station name or code."),
          "departure": DATETIME("Earliest departure."),
          "max_changes": I("Maximum changes.", minimum=0, maximum=5),
          "travel_class": S("Class.", enum=["first", "second"], default="second"),
          "rail_pass": B("Only show trains valid with a rail pass.", default=False),
      },
      ["from_station", "to_station", "departure"]),

    T("search_car_rentals",
      "Find rental car offers for a pickup location and dates.",
      {
          "pickup_location": S("Airport code or city."),
          "dropoff_location": S("Drop-off location; default same as pickup."),
          "pickup_at": DATETIME("Pickup time."),
          "dropoff_at": DATETIME("Return time."),
          "car_class": S("Class.", enum=["economy", "compact", "midsize", "suv", "van", "luxury"]),
          "driver_age": I("Main driver's age.", minimum=18, maximum=99, default=30),
      },
      ["pickup_location", "pickup_at", "dropoff_at"]),

    T("find_ev_chargers",
      "Find electric vehicle charging stations near a location.",
      {
          "location": S("Address or 'lat,lng'."),
          "connector": S("Connector type.", enum=["ccs", "chademo", "type2", "nacs"]),
          "min_power_kw": N("Minimum charger power in kW.", minimum=0, default=50),
          "available_only": B("Only chargers free now.", default=True),
          "radius_km": N("Search radius in km.", minimum=0.5, maximum=100, default=10),
      },
      ["location"]),

    T("get_sun_times",
      "Get sunrise, sunset and twilight times for a place and date.",
      {
          "location": S("City or 'lat,lng'."),
          "date": DATE("Date; default today."),
      },
      ["location"]),

    T("get_public_holidays",
      "List public holidays for a country and year.",
      {
          "country_code": S("ISO 3166-1 alpha-2 country code."),
          "year": I("Year.", minimum=1900, maximum=2100),
          "subdivision": S("State or region code for regional holidays, e.g. 'DE-BY'."),
      },
      ["country_code", "year"]),

    T("get_sports_scores",
      "Get live or final scores and upcoming fixtures for a league or team.",
      {
          "sport": S("Sport.", enum=["football", "basketball", "baseball", "hockey", "tennis", "cricket"]),
          "league": S("League, e.g. 'Premier League' or 'NBA'."),
          "team": S("Team name to filter."),
          "date": DATE("Match date; default today."),
      },
      ["sport"]),

    T("search_products",
      "Search the product catalogue.",
      {
          "query": S("Search text."),
          "category": S("Category slug, e.g. 'electronics/laptops'."),
          "min_price": N("Minimum price.", minimum=0),
          "max_price": N("Maximum price.", minimum=0),
          "in_stock_only": B("Hide out-of-stock items.", default=True),
          "sort": S("Sort order.", enum=["relevance", "price_asc", "price_desc", "rating", "newest"],
                    default="relevance"),
          "page": I("Page number.", minimum=1, default=1),
      },
      ["query"]),

    T("add_to_cart",
      "Add a product to the user's shopping cart.",
      {
          "product_id": S("Product id."),
          "variant_id": S("Variant id for size or colour."),
          "quantity": I("Units to add.", minimum=1, maximum=99, default=1),
      },
      ["product_id"]),

    T("apply_coupon",
      "Apply a coupon code to the current cart and return the new totals.",
      {
          "cart_id": S("Cart id."),
          "code": S("Coupon code, case-insensitive."),
      },
      ["cart_id", "code"]),

    T("get_product_reviews",
      "Get customer reviews for a product.",
      {
          "product_id": S("Product id."),
          "min_rating": I("Only reviews with at least this many stars.", minimum=1, maximum=5),
          "sort": S("Order.", enum=["most_helpful", "newest", "lowest", "highest"], default="most_helpful"),
          "limit": I("Maximum reviews.", minimum=1, maximum=50, default=10),
          "with_photos": B("Only reviews with photos.", default=False),
      },
      ["product_id"]),

    T("create_price_alert",
      "Notify the user when a product's price drops below a target.",
      {
          "product_id": S("Product id."),
          "target_price": N("Alert when the price is at or below this.", minimum=0.01),
          "currency": S("ISO 4217 code.", default="USD"),
          "expires_on": DATE("Stop watching after this date."),
      },
      ["product_id", "target_price"]),

    T("create_return_authorization",
      "Start a return for delivered items and get a return label.",
      {
          "order_id": S("Order number."),
          "items": A("Items to return.", O({
              "sku": S("Item SKU."),
              "quantity": I("Units.", minimum=1),
              "condition": S("Item condition.", enum=["unopened", "opened", "damaged"]),
          }, ["sku", "quantity"]), minItems=1),
          "resolution": S("Desired outcome.", enum=["refund", "exchange", "store_credit"], default="refund"),
          "drop_off": B("Customer will drop off at a carrier point instead of a pickup.", default=True),
      },
      ["order_id", "items"]),

    T("create_purchase_order",
      "Create a purchase order to restock inventory from a supplier.",
      {
          "supplier_id": S("Supplier id."),
          "warehouse_id": S("Receiving warehouse."),
          "lines": A("Order lines.", O({
              "sku": S("SKU."),
              "quantity": I("Units.", minimum=1),
              "unit_cost": N("Agreed cost per unit.", minimum=0),
          }, ["sku", "quantity"]), minItems=1),
          "expected_delivery": DATE("Expected delivery date."),
      },
      ["supplier_id", "warehouse_id", "lines"]),

    T("transfer_stock",
      "Move stock between two warehouses.",
      {
          "sku": S("SKU to move."),
          "quantity": I("Units to move.", minimum=1),
          "from_warehouse": S("Source warehouse id."),
          "to_warehouse": S("Destination warehouse id."),
          "priority": S("Transfer priority.", enum=["standard", "expedited"], default="standard"),
      },
      ["sku", "quantity", "from_warehouse", "to_warehouse"]),

    T("github.create_issue",
      "Create an issue in a GitHub repository.",
      {
          "repo": S("Repository as 'owner/name'."),
          "title": S("Issue title."),
          "body": S("Issue body in Markdown."),
          "labels": A("Labels to apply.", S("Label.")),
          "assignees": A("GitHub usernames to assign.", S("Username."), maxItems=10),
      },
      ["repo", "title"]),

    T("github.search_code",
      "Search code in GitHub repositories.",
      {
          "query": S("Code search query, e.g. 'addEventListener language:ts'."),
          "repo": S("Restrict to 'owner/name'."),
          "per_page": I("Results per page.", minimum=1, maximum=100, default=20),
      },
      ["query"]),

    T("k8s.scale_deployment",
      "Scale a Kubernetes deployment to a number of replicas.",
      {
          "cluster": S("Cluster name."),
          "namespace": S("Namespace.", default="default"),
          "deployment": S("Deployment name."),
          "replicas": I("Desired replicas.", minimum=0, maximum=500),
          "dry_run": B("Validate without applying.", default=False),
      },
      ["cluster", "deployment", "replicas"]),

    T("query_logs",
      "Search application logs within a time window.",
      {
          "query": S("Log query, e.g. 'service:api level:error \"timeout\"'."),
          "start": DATETIME("Window start."),
          "end": DATETIME("Window end; default now."),
          "limit": I("Maximum log lines.", minimum=1, maximum=5000, default=200),
          "order": S("Order.", enum=["newest", "oldest"], default="newest"),
      },
      ["query", "start"]),

    T("query_metrics",
      "Query a time-series metric and return aggregated points.",
      {
          "metric": S("Metric name, e.g. 'http.request.duration'."),
          "aggregation": S("Aggregation.", enum=["avg", "sum", "min", "max", "p50", "p95", "p99"],
                           default="avg"),
          "tags": O({}, desc="Tag filters as key/value pairs.", additionalProperties={"type": "string"}),
          "start": DATETIME("Window start."),
          "end": DATETIME("Window end."),
          "step_seconds": I("Bucket size.", minimum=10, maximum=86400, default=60),
      },
      ["metric", "start", "end"]),

    T("acknowledge_alert",
      "Acknowledge or resolve an on-call alert.",
      {
          "alert_id": S("Alert id."),
          "action": S("Action.", enum=["acknowledge", "resolve", "escalate"]),
          "note": S("Note for the incident timeline."),
      },
      ["alert_id", "action"]),

    T("manage_vm",
      "Start, stop, reboot or resize a cloud virtual machine.",
      {
          "instance_id": S("Instance id."),
          "action": S("Operation.", enum=["start", "stop", "reboot", "resize"]),
          "machine_type": S("New machine type; required for resize, e.g. 'n2-standard-8'."),
          "force": B("Hard stop without graceful shutdown.", default=False),
      },
      ["instance_id", "action"]),

    T("dns_lookup",
      "Resolve DNS records for a domain.",
      {
          "domain": S("Domain name."),
          "record_type": S("Record type.", enum=["A", "AAAA", "CNAME", "MX", "TXT", "NS", "SOA"], default="A"),
          "resolver": S("Resolver IP; default the system resolver."),
      },
      ["domain"]),

    T("get_crypto_price",
      "Get the spot price and 24 h change of a cryptocurrency.",
      {
          "asset": S("Asset symbol, e.g. BTC or ETH."),
          "quote_currency": S("Quote currency, e.g. USD or EUR.", default="USD"),
      },
      ["asset"]),

    T("calculate_loan_payment",
      "Calculate the periodic payment and total interest for an amortising loan.",
      {
          "principal": N("Loan amount.", minimum=0),
          "annual_rate_percent": N("Nominal annual interest rate in percent, e.g. 4.5.",
                                   minimum=0, maximum=100),
          "term_months": I("Term in months.", minimum=1, maximum=480),
          "payments_per_year": I("Payments per year.", enum=[12, 26, 52], default=12),
      },
      ["principal", "annual_rate_percent", "term_months"]),

    T("file_insurance_claim",
      "File an insurance claim with incident details and supporting documents.",
      {
          "policy_number": S("Policy number."),
          "incident_date": DATE("Date of the incident."),
          "claim_type": S("Type.", enum=["auto", "home", "travel", "health", "device"]),
          "description": S("What happened."),
          "estimated_amount": N("Estimated loss, e.g. 1250.00 €.", minimum=0),
          "document_ids": A("Uploaded photos or receipts.", S("Document id.")),
      },
      ["policy_number", "incident_date", "claim_type", "description"]),

    T("book_medical_appointment",
      "Book an appointment with a clinician.",
      {
          "patient_id": S("Patient id."),
          "specialty": S("Specialty.", enum=["general_practice", "dermatology", "cardiology",
                                             "pediatrics", "dentistry", "physiotherapy"]),
          "preferred_dates": A("Acceptable dates, in preference order.", S("Date.", format="date"), maxItems=5),
          "visit_type": S("Visit type.", enum=["in_person", "video"], default="in_person"),
          "reason": S("Reason for the visit."),
      },
      ["patient_id", "specialty"]),

    T("request_prescription_refill",
      "Request a refill of an existing prescription at a pharmacy.",
      {
          "prescription_id": S("Prescription number."),
          "pharmacy_id": S("Pharmacy id; default the patient's usual pharmacy."),
          "delivery": B("Deliver to the patient's address.", default=False),
      },
      ["prescription_id"]),

    T("log_workout",
      "Record a workout in the user's fitness log.",
      {
          "activity": S("Activity.", enum=["run", "walk", "cycle", "swim", "strength", "yoga", "other"]),
          "duration_minutes": N("Duration in minutes.", minimum=1),
          "distance_km": N("Distance in km, if applicable.", minimum=0),
          "avg_heart_rate": I("Average heart rate in bpm.", minimum=30, maximum=230),
          "perceived_effort": I("Effort on a 1-10 scale.", minimum=1, maximum=10),
          "started_at": DATETIME("Start time; default now minus duration."),
      },
      ["activity", "duration_minutes"]),

    T("search_jobs",
      "Search job postings.",
      {
          "keywords": S("Role or skills, e.g. 'data engineer Spark'."),
          "location": S("City or 'remote'."),
          "employment_type": S("Type.", enum=["full_time", "part_time", "contract", "internship"]),
          "min_salary": I("Minimum annual salary in local currency.", minimum=0),
          "posted_within_days": I("Only postings newer than this.", minimum=1, maximum=60, default=14),
      },
      ["keywords"]),

    T("search_real_estate",
      "Search property listings for sale or rent.",
      {
          "location": S("City, neighbourhood or postcode."),
          "listing_type": S("Sale or rent.", enum=["sale", "rent"]),
          "min_bedrooms": I("Minimum bedrooms.", minimum=0, maximum=10),
          "max_price": N("Maximum price (monthly rent for rentals).", minimum=0),
          "property_types": A("Property types.", S("Type.", enum=["apartment", "house", "townhouse", "land"])),
          "min_area_m2": N("Minimum floor area in m².", minimum=0),
      },
      ["location", "listing_type"]),

    T("create_note",
      "Create a note in the user's notebook.",
      {
          "title": S("Note title."),
          "content": S("Note body in Markdown."),
          "notebook": S("Notebook name.", default="Inbox"),
          "tags": A("Tags.", S("Tag."), uniqueItems=True),
          "pinned": B("Pin the note.", default=False),
      },
      ["title", "content"]),

    T("add_todo_item",
      "Add a task to a to-do list.",
      {
          "title": S("Task title."),
          "list": S("List name.", default="Personal"),
          "due": DATE("Due date."),
          "priority": I("Priority from 1 (highest) to 4.", minimum=1, maximum=4, default=4),
          "subtasks": A("Checklist items.", S("Subtask.")),
      },
      ["title"]),

    T("update_spreadsheet_range",
      "Write values into a range of a spreadsheet.",
      {
          "spreadsheet_id": S("Spreadsheet id."),
          "range": S("A1 notation, e.g. 'Sheet1!B2:D4'."),
          "values": A("Rows of cell values.", A("A row.", {"type": ["string", "number", "boolean", "null"]})),
          "value_input": S("How input is interpreted.", enum=["raw", "user_entered"], default="user_entered"),
      },
      ["spreadsheet_id", "range", "values"]),

    T("search_knowledge_base",
      "Semantic search over the company knowledge base; returns passages with sources.",
      {
          "query": S("Natural-language question."),
          "collections": A("Collections to search; default all.", S("Collection name.")),
          "top_k": I("Passages to return.", minimum=1, maximum=20, default=5),
          "min_score": N("Minimum similarity score.", minimum=0, maximum=1, default=0.5),
      },
      ["query"]),

    T("summarize_document",
      "Summarise a stored document.",
      {
          "document_id": S("Document id."),
          "length": S("Summary length.", enum=["short", "medium", "long"], default="medium"),
          "focus": S("Aspect to emphasise, e.g. 'risks' or 'action items'."),
          "output_language": S("Language code of the summary.", default="en"),
      },
      ["document_id"]),

    T("generate_image",
      "Generate an image from a text prompt.",
      {
          "prompt": S("Description of the image."),
          "negative_prompt": S("What to avoid in the image."),
          "size": S("Image size.", enum=["512x512", "1024x1024", "1024x1792", "1792x1024"], default="1024x1024"),
          "style": S("Style preset.", enum=["photo", "illustration", "3d", "pixel_art"]),
          "seed": I("Seed for reproducible results.", minimum=0, maximum=4294967295),
          "guidance_scale": N("Prompt adherence.", minimum=1, maximum=20, default=7.5),
      },
      ["prompt"]),

    T("transcribe_audio",
      "Transcribe an uploaded audio file to text.",
      {
          "file_id": S("Uploaded audio file id."),
          "language": S("Spoken language code; omit to auto-detect."),
          "diarize": B("Label different speakers.", default=False),
          "timestamps": S("Timestamp granularity.", enum=["none", "segment", "word"], default="segment"),
      },
      ["file_id"]),

    T("send_sms",
      "Send a text message to a phone number.",
      {
          "to": S("Recipient in E.164 format, e.g. '+14155550123'.", pattern="^\\+[1-9][0-9]{6,14}$"),
          "message": S("Message text.", maxLength=1600),
          "sender_id": S("Registered sender id or number."),
      },
      ["to", "message"]),

    T("run_payroll_preview",
      "Preview a payroll run with gross pay, taxes and net pay per employee.",
      {
          "pay_period_end": DATE("Last day of the pay period."),
          "department": S("Limit to a department."),
          "include_bonuses": B("Include pending bonuses.", default=True),
      },
      ["pay_period_end"]),

    T("create_survey",
      "Create a customer feedback survey and return its share link.",
      {
          "title": S("Survey title."),
          "questions": A("Questions in order.", O({
              "text": S("Question text."),
              "kind": S("Answer type.", enum=["rating", "single_choice", "multi_choice", "free_text"]),
              "options": A("Choices for choice questions.", S("Option.")),
              "required": B("Answer required.", default=False),
          }, ["text", "kind"]), minItems=1, maxItems=30),
          "anonymous": B("Do not record respondent identity.", default=True),
          "closes_on": DATE("Close date."),
      },
      ["title", "questions"]),

]

# ---------------------------------------------------------------- tools_unicode.json
UNICODE_TOOLS = [
    T("tianqi_chaxun",
      "查询指定城市的天气预报，返回气温（°C）、湿度和风力。天気予報も対応。",
      {
          "city": S("城市名称，例如「北京」或「東京」。", enum=["北京", "上海", "東京", "서울", "台北"]),
          "days": I("预报天数（1–7）。", minimum=1, maximum=7, default=3),
          "lang": S("返回语言。", enum=["zh-CN", "ja", "ko"], default="zh-CN"),
      },
      ["city"]),

    T("reserver_table",
      "Réserver une table dans un café ou une brasserie — « à la carte », menu déjà réglé ; "
      "Straße, Ålesund, São Paulo, niño, Kraków are all accepted.",
      {
          "établissement": S("Nom de l'établissement, p. ex. « Café de Flore »."),
          "placement": S("Préférence de placement.", enum=["terrasse", "intérieur", "comptoir"],
                         default="intérieur"),
          "couverts": I("Nombre de couverts.", minimum=1, maximum=12),
          "prix_max": N("Budget maximal par personne en €.", minimum=0),
      },
      ["établissement", "couverts"]),

    T("react_with_emoji",
      "Add an emoji reaction 👍 to a chat message. Supports ZWJ sequences like 👨‍👩‍👧‍👦, "
      "skin tones 👋🏽 and flags 🇯🇵🇫🇷.",
      {
          "message_id": S("Id of the message to react to."),
          "emoji": S("Reaction.", enum=["👍", "❤️", "😂", "🎉", "👨‍💻", "👋🏽", "🇯🇵"]),
          "remove": B("Remove the reaction instead of adding it ✖️.", default=False),
      },
      ["message_id", "emoji"]),
]

# ---------------------------------------------------------------- output
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
SET_SIZES = (5, 10, 20, 50, 100)


def validate(tools, label):
    names = set()
    for i, t in enumerate(tools):
        f = t["function"]
        assert NAME_RE.match(f["name"]), (label, i, f["name"])
        assert f["name"] not in names, (label, i, "duplicate", f["name"])
        names.add(f["name"])
        params = f["parameters"]
        assert params["type"] == "object", (label, i)
        for r in params["required"]:
            assert r in params["properties"], (label, i, "required", r)


def write_json(path, data):
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert len(TOOLS) == 100, len(TOOLS)
    validate(TOOLS, "TOOLS")
    validate(UNICODE_TOOLS, "UNICODE_TOOLS")
    for t in TOOLS[:20]:
        assert json.dumps(t).isascii(), t["function"]["name"]
    assert not json.dumps(TOOLS, ensure_ascii=False).isascii()

    out_dir = os.path.join(root, "resources", "toolsets")
    os.makedirs(out_dir, exist_ok=True)
    for n in SET_SIZES:
        write_json(os.path.join(out_dir, "tools_%d.json" % n), TOOLS[:n])
        chars = sum(len(json.dumps(t, ensure_ascii=False)) for t in TOOLS[:n])
        print("tools_%d.json: %d tools, %d chars of compact JSON" % (n, n, chars))
    write_json(os.path.join(out_dir, "tools_unicode.json"), UNICODE_TOOLS)
    print("tools_unicode.json: %d tools" % len(UNICODE_TOOLS))
    with open(os.path.join(root, "resources", "system_prompt.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(SYSTEM_PROMPT)  # no trailing newline
    print("system_prompt.txt: %d chars" % len(SYSTEM_PROMPT))


if __name__ == "__main__":
    main()
