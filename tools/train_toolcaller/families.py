"""Synthetic tool families for make_data.py --phrasing v3 and make_family_eval.py.

A family is one made-up domain ("greenhouse sensors") with a few objects (a sensor, a bed) and
tools built from verbs x objects: get, list, create, update, delete and one or two domain actions
("calibrate a sensor"). Each family has a stable id; its tools' names and schemas depend only on
that id, while their descriptions are reworded from templates every time a context is built.

HELD_OUT_FAMILIES (below) is the split: those families never reach training data (make_data.py
asserts it) and make_family_eval.py builds resources/eval/tool_families.jsonl from them alone.
BFCL functions are split by family too (bfcl_family(), bfcl_held_out()).

Queries are generated from a tool's schema; every argument value is drawn from a large made-up
pool (ids, codes, e-mails, people, places, titles, quoted texts) and appears verbatim in the query,
so a right call has to copy it.
"""
import hashlib
import random
import re

# ---- the split -------------------------------------------------------------------------------------
# Chosen by hand: every fifth family of FAMILIES in table order (5th, 10th, ...), so that held-out
# families spread over the table's kinds of domain. Nothing of these reaches training data.
HELD_OUT_FAMILIES = ("library_loans", "greenhouse_sensors", "ferry_bookings", "beehive_monitoring",
                     "choir_rehearsals", "drone_surveys", "tattoo_studio", "observatory_time")

# BFCL functions: a family is the part of the name before the first '.' (`math.gcd` -> math), or
# the service of schema-guided-dialogue names (`Buses_3_BuyBusTicket` -> Buses_3); any other name
# is a family of its own. A family is held out when the first byte of sha1(family) is below 26
# (about 10%); functions that share a name with a bundled tool are never held out.
BFCL_HELD_OUT_BYTE = 26


def bfcl_family(name):
    if "." in name:
        return name.split(".")[0].lower()
    m = re.match(r"^([A-Z][A-Za-z]+_\d+)_", name)
    return m.group(1) if m else name


def bfcl_held_out(name, bundled_names=()):
    if name in bundled_names:
        return False
    return hashlib.sha1(bfcl_family(name).encode("utf-8")).digest()[0] < BFCL_HELD_OUT_BYTE


# ---- the families ------------------------------------------------------------------------------------
# (id, domain phrase, server name, objects, actions)
#   object: (noun, plural, id prefix, [(attribute, kind)])
#   action: (verb, object index, [(attribute, kind)], what it does)
# kinds: person place date datetime email title text code url int:LO:HI num:LO:HI enum:A|B|C bool
#        tags emails window lines ref:PREFIX
FAMILIES = [
    ("fleet_telematics", "fleet telematics", "fleet", [
        ("vehicle", "vehicles", "VH", [("plate", "code"), ("depot", "place"), ("driver", "person"),
                                        ("status", "enum:active|parked|in_service|retired")]),
        ("trip", "trips", "TRP", [("vehicle_id", "ref:VH"), ("start_date", "date"), ("distance_km", "num:0:2000")])],
     [("geofence", 0, [("radius_m", "int:50:5000"), ("center", "place")], "draw a geofence around a vehicle"),
      ("immobilize", 0, [("reason", "text")], "remotely immobilize a vehicle")]),
    ("payroll_runs", "payroll runs", "payroll", [
        ("payslip", "payslips", "PS", [("employee", "person"), ("period", "code"), ("gross_amount", "num:0:50000")]),
        ("bonus", "bonuses", "BON", [("employee", "person"), ("amount", "num:1:20000"), ("note", "text")])],
     [("approve", 1, [("approver", "email")], "approve a pending bonus")]),
    ("parking_permits", "parking permits", "permits", [
        ("permit", "permits", "PMT", [("holder", "person"), ("zone", "enum:A|B|C|D|visitor"),
                                       ("valid_until", "date"), ("plate", "code")])],
     [("renew", 0, [("months", "int:1:24")], "renew a parking permit"),
      ("suspend", 0, [("until", "date"), ("reason", "text")], "suspend a parking permit")]),
    ("lab_samples", "laboratory samples", "lims", [
        ("sample", "samples", "SMP", [("specimen_type", "enum:blood|urine|saliva|tissue|swab"),
                                       ("collected_on", "date"), ("patient_ref", "code")]),
        ("assay", "assays", "ASY", [("sample_id", "ref:SMP"), ("panel", "title"), ("priority", "enum:routine|urgent|stat")])],
     [("relabel", 0, [("new_label", "code")], "print a new barcode label for a sample")]),
    ("library_loans", "library loans", "library", [
        ("book_loan", "book loans", "LN", [("borrower", "person"), ("book_title", "title"), ("due_date", "date")]),
        ("book_hold", "book holds", "HLD", [("borrower", "person"), ("book_title", "title"), ("pickup_branch", "place")])],
     [("renew", 0, [("weeks", "int:1:6")], "extend the due date of a book loan"),
      ("waive_fine", 0, [("amount", "num:0:200"), ("note", "text")], "waive the overdue fine of a book loan")]),
    ("wind_farm", "wind farm operations", "windfarm", [
        ("turbine", "turbines", "WT", [("site", "place"), ("rated_kw", "int:100:15000"),
                                        ("state", "enum:running|curtailed|stopped|maintenance")]),
        ("work_order", "work orders", "WO", [("turbine_id", "ref:WT"), ("technician", "person"), ("due", "date")])],
     [("curtail", 0, [("limit_kw", "int:0:15000"), ("window", "window")], "limit a turbine's output for a time window")]),
    ("pet_clinic", "veterinary clinic", "vetclinic", [
        ("patient", "patients", "PET", [("name", "title"), ("species", "enum:dog|cat|rabbit|parrot|ferret"),
                                         ("owner_email", "email")]),
        ("vaccination", "vaccinations", "VAX", [("patient_id", "ref:PET"), ("vaccine", "code"), ("given_on", "date")])],
     [("schedule_checkup", 0, [("when", "datetime"), ("vet", "person")], "book a checkup for a pet")]),
    ("event_ticketing", "event ticketing", "tickets", [
        ("event", "events", "EVT", [("title", "title"), ("venue", "place"), ("starts_at", "datetime"),
                                     ("capacity", "int:10:80000")]),
        ("seat_hold", "seat holds", "SH", [("event_id", "ref:EVT"), ("seats", "tags"), ("customer_email", "email")])],
     [("release", 1, [], "release a seat hold back to sale")]),
    ("warehouse_slots", "warehouse slotting", "wms", [
        ("bin", "bins", "BIN", [("aisle", "code"), ("level", "int:1:12"), ("max_weight_kg", "num:1:2000")]),
        ("pick_list", "pick lists", "PL", [("lines", "lines"), ("picker", "person"), ("dock", "code")])],
     [("cycle_count", 0, [("counted_by", "person"), ("quantity", "int:0:9999")], "record a cycle count for a bin")]),
    ("greenhouse_sensors", "greenhouse sensors", "greenhouse", [
        ("climate_probe", "climate probes", "GS", [("bed", "code"), ("metric", "enum:temperature|humidity|soil_moisture|co2|light"),
                                      ("installed_on", "date")]),
        ("growing_bed", "growing beds", "BED", [("crop", "title"), ("area_m2", "num:1:500"), ("irrigated", "bool")])],
     [("calibrate", 0, [("offset", "num:-5:5"), ("technician", "person")], "calibrate a climate probe against a reference"),
      ("set_threshold", 0, [("low", "num:-20:100"), ("high", "num:-20:100"), ("alert_email", "email")],
       "set the alert thresholds of a climate probe")]),
    ("museum_archive", "museum archive", "archive", [
        ("artifact", "artifacts", "ART", [("title", "title"), ("era", "enum:ancient|medieval|early_modern|modern|contemporary"),
                                           ("gallery", "code"), ("donor", "person")]),
        ("loan_request", "loan requests", "LR", [("artifact_id", "ref:ART"), ("borrowing_museum", "place"), ("period", "window")])],
     [("condition_report", 0, [("condition", "enum:excellent|good|fair|poor"), ("notes", "text")],
       "file a condition report for an artifact")]),
    ("solar_installs", "solar installations", "solar", [
        ("installation", "installations", "SOL", [("site_address", "place"), ("panels", "int:1:400"), ("owner", "person")]),
        ("inspection", "inspections", "INS", [("installation_id", "ref:SOL"), ("inspector", "person"), ("date", "date")])],
     [("commission", 0, [("commissioned_on", "date"), ("inverter_serial", "code")], "commission a finished installation")]),
    ("dental_practice", "dental practice", "dental", [
        ("appointment", "appointments", "APT", [("patient", "person"), ("starts_at", "datetime"),
                                                 ("treatment", "enum:cleaning|filling|extraction|checkup|whitening")]),
        ("x_ray", "x-rays", "XR", [("patient", "person"), ("teeth", "tags"), ("taken_on", "date")])],
     [("send_reminder", 0, [("channel", "enum:sms|email|call")], "remind a patient of an appointment")]),
    ("film_production", "film production", "studio", [
        ("scene", "scenes", "SC", [("title", "title"), ("location", "place"), ("shoot_date", "date")]),
        ("call_sheet", "call sheets", "CS", [("scene_id", "ref:SC"), ("crew_emails", "emails"), ("call_time", "datetime")])],
     [("wrap", 0, [("takes", "int:1:80"), ("notes", "text")], "mark a scene as wrapped")]),
    ("ferry_bookings", "ferry bookings", "ferry", [
        ("sailing", "sailings", "SAIL", [("route", "code"), ("departs_at", "datetime"), ("vessel", "title")]),
        ("ferry_booking", "ferry bookings", "FB", [("sailing_id", "ref:SAIL"), ("passengers", "int:1:9"),
                                                    ("vehicle_type", "enum:none|car|van|motorbike|bicycle"),
                                                    ("lead_passenger", "person")])],
     [("check_in", 1, [("lane", "code")], "check a booking in at the terminal")]),
    ("hospital_beds", "hospital bed management", "beds", [
        ("bed", "beds", "BD", [("ward", "code"), ("bed_type", "enum:general|icu|maternity|pediatric"), ("occupied", "bool")]),
        ("admission", "admissions", "ADM", [("patient_ref", "code"), ("bed_id", "ref:BD"), ("admitted_at", "datetime")])],
     [("discharge", 1, [("discharged_at", "datetime"), ("summary", "text")], "discharge an admitted patient")]),
    ("coworking_space", "coworking space", "cowork", [
        ("desk", "desks", "DSK", [("floor", "int:1:30"), ("zone", "code"), ("standing", "bool")]),
        ("membership", "memberships", "MEM", [("member_email", "email"), ("plan", "enum:day_pass|flex|dedicated|office"),
                                               ("starts_on", "date")])],
     [("assign_desk", 1, [("desk_code", "code")], "assign a desk to a membership")]),
    ("food_truck", "food truck operations", "foodtruck", [
        ("menu_item", "menu items", "MI", [("name", "title"), ("price", "num:1:40"), ("vegan", "bool")]),
        ("stop", "stops", "STP", [("spot", "place"), ("opens_at", "datetime"), ("hours", "int:1:12")])],
     [("mark_sold_out", 0, [], "mark a menu item as sold out")]),
    ("ski_resort", "ski resort", "skiresort", [
        ("lift_pass", "lift passes", "LP", [("holder", "person"), ("days", "int:1:14"), ("age_group", "enum:child|adult|senior")]),
        ("lesson", "lessons", "LSN", [("instructor", "person"), ("level", "enum:beginner|intermediate|advanced"),
                                       ("starts_at", "datetime")])],
     [("block_pass", 0, [("reason", "text")], "block a lost lift pass")]),
    ("beehive_monitoring", "beehive monitoring", "apiary", [
        ("hive", "hives", "HV", [("apiary", "place"), ("queen_marked", "bool"), ("frames", "int:1:40")]),
        ("hive_inspection", "hive inspections", "HI", [("hive_id", "ref:HV"), ("inspected_on", "date"),
                                                       ("temperament", "enum:calm|nervous|aggressive")])],
     [("record_harvest", 0, [("honey_kg", "num:0:80"), ("harvested_on", "date")], "record a honey harvest from a hive")]),
    ("courier_dispatch", "courier dispatch", "dispatch", [
        ("job", "jobs", "JOB", [("pickup", "place"), ("dropoff", "place"), ("deadline", "datetime")]),
        ("rider", "riders", "RDR", [("name", "person"), ("vehicle", "enum:bike|scooter|van|on_foot"), ("phone", "code")])],
     [("assign_job", 0, [("rider_id", "ref:RDR")], "assign a delivery job to a rider")]),
    ("insurance_claims", "insurance claims", "claims", [
        ("claim", "claims", "CLM", [("policy_number", "code"), ("incident_date", "date"), ("amount", "num:0:250000"),
                                     ("category", "enum:auto|home|travel|health|pet")]),
        ("adjuster_note", "adjuster notes", "AN", [("claim_id", "ref:CLM"), ("author", "person"), ("note", "text")])],
     [("escalate", 0, [("to_team", "enum:fraud|legal|senior_review"), ("reason", "text")], "escalate a claim to a team")]),
    ("recipe_box", "recipe collection", "recipes", [
        ("recipe", "recipes", "RCP", [("title", "title"), ("servings", "int:1:24"), ("cuisine", "enum:italian|thai|mexican|indian|french|other"),
                                       ("tags", "tags")]),
        ("meal_plan", "meal plans", "MP", [("week_of", "date"), ("owner_email", "email")])],
     [("scale", 0, [("servings", "int:1:48")], "rescale a recipe to a number of servings")]),
    ("gym_classes", "gym classes", "gym", [
        ("class_session", "class sessions", "CLS", [("title", "title"), ("coach", "person"), ("starts_at", "datetime"),
                                                     ("spots", "int:1:60")]),
        ("gym_member", "gym members", "GM", [("name", "person"), ("email", "email"), ("tier", "enum:basic|plus|premium")])],
     [("waitlist", 0, [("member_id", "ref:GM")], "put a member on a class waitlist")]),
    ("choir_rehearsals", "choir rehearsals", "choir", [
        ("rehearsal", "rehearsals", "RH", [("venue", "place"), ("starts_at", "datetime"), ("piece", "title")]),
        ("chorister", "choristers", "CH", [("name", "person"), ("voice_part", "enum:soprano|alto|tenor|bass"), ("email", "email")])],
     [("take_attendance", 0, [("present", "emails")], "record who attended a rehearsal")]),
    ("software_licenses", "software licenses", "licensing", [
        ("license_key", "license keys", "LK", [("product", "title"), ("seats", "int:1:5000"), ("expires_on", "date")]),
        ("seat_assignment", "seat assignments", "SA", [("license_id", "ref:LK"), ("user_email", "email")])],
     [("revoke", 0, [("reason", "text")], "revoke a license key")]),
    ("bike_share", "bike sharing", "bikeshare", [
        ("dock_station", "dock stations", "DS", [("location", "place"), ("docks", "int:4:60"), ("electric", "bool")]),
        ("rental", "rentals", "RNT", [("rider_email", "email"), ("station_id", "ref:DS"), ("started_at", "datetime")])],
     [("end_rental", 1, [("return_station", "code"), ("distance_km", "num:0:80")], "end a bike rental")]),
    ("court_filings", "court filings", "docket", [
        ("case_file", "case files", "CF", [("caption", "title"), ("court", "place"), ("filed_on", "date")]),
        ("hearing", "hearings", "HRG", [("case_id", "ref:CF"), ("judge", "person"), ("starts_at", "datetime")])],
     [("seal", 0, [("order_ref", "code")], "seal a case file under a court order")]),
    ("water_utility", "water utility", "waterco", [
        ("meter", "meters", "MTR", [("address", "place"), ("diameter_mm", "int:15:300"), ("smart", "bool")]),
        ("leak_report", "leak reports", "LKR", [("location", "place"), ("severity", "enum:minor|major|burst"), ("reported_by", "email")])],
     [("read_meter", 0, [("reading_m3", "num:0:99999"), ("read_on", "date")], "submit a meter reading")]),
    ("drone_surveys", "drone surveys", "drones", [
        ("flight_plan", "flight plans", "FP", [("area", "place"), ("altitude_m", "int:10:120"), ("pilot", "person"),
                                               ("flight_date", "date")]),
        ("drone_unit", "drone units", "DU", [("model", "title"), ("serial", "code"), ("battery_cycles", "int:0:2000")])],
     [("ground", 1, [("reason", "text")], "ground a drone unit")]),
    ("wedding_planner", "wedding planning", "weddings", [
        ("guest", "guests", "GST", [("name", "person"), ("email", "email"), ("meal", "enum:meat|fish|vegetarian|vegan"),
                                     ("plus_one", "bool")]),
        ("vendor_booking", "vendor bookings", "VB", [("vendor", "title"), ("service", "enum:catering|flowers|music|photo|venue"),
                                                     ("deposit", "num:0:20000")])],
     [("seat_guest", 0, [("table", "int:1:60")], "seat a guest at a table")]),
    ("boat_marina", "marina berths", "marina", [
        ("berth", "berths", "BRT", [("pontoon", "code"), ("length_m", "num:4:60"), ("shore_power", "bool")]),
        ("berth_booking", "berth bookings", "BB", [("boat_name", "title"), ("skipper", "person"), ("stay", "window")])],
     [("log_arrival", 1, [("arrived_at", "datetime")], "log a boat's arrival at its berth")]),
    ("tattoo_studio", "tattoo studio", "inkstudio", [
        ("tattoo_session", "tattoo sessions", "TS", [("client", "person"), ("artist", "person"), ("starts_at", "datetime"),
                                                     ("placement", "enum:arm|leg|back|chest|neck|hand")]),
        ("design_sketch", "design sketches", "DES", [("title", "title"), ("size_cm", "num:1:60"), ("color", "bool")])],
     [("take_deposit", 0, [("amount", "num:10:500"), ("client_email", "email")], "take a deposit for a session")]),
    ("school_buses", "school bus routes", "schoolbus", [
        ("bus_route", "bus routes", "BR", [("school", "place"), ("morning_departure", "datetime"), ("stops", "tags")]),
        ("student_rider", "student riders", "SR", [("student", "person"), ("route_id", "ref:BR"), ("guardian_email", "email")])],
     [("announce_delay", 0, [("minutes", "int:1:120"), ("message", "text")], "announce a delay on a route")]),
    ("crop_insurance", "farm records", "farm", [
        ("field_plot", "field plots", "FLD", [("crop", "title"), ("hectares", "num:0:900"), ("soil", "enum:clay|loam|sand|silt")]),
        ("spray_log", "spray logs", "SPR", [("field_id", "ref:FLD"), ("product", "code"), ("sprayed_on", "date")])],
     [("forecast_yield", 0, [("season", "code")], "estimate the yield of a field plot")]),
    ("observatory_time", "observatory scheduling", "observatory", [
        ("observation", "observations", "OBS", [("target", "code"), ("observer", "person"), ("night_of", "date"),
                                                 ("filter", "enum:U|B|V|R|I|H_alpha")]),
        ("telescope", "telescopes", "TEL", [("aperture_mm", "int:50:10000"), ("site", "place")])],
     [("close_dome", 1, [("reason", "text")], "close a telescope's dome")]),
    ("rental_cars", "car rental desk", "carhire", [
        ("rental_agreement", "rental agreements", "RA", [("driver", "person"), ("pickup_at", "datetime"),
                                                         ("car_class", "enum:mini|compact|suv|van|luxury")]),
        ("damage_report", "damage reports", "DR", [("agreement_id", "ref:RA"), ("panel", "title"), ("photos", "tags")])],
     [("extend", 0, [("days", "int:1:30")], "extend a rental agreement")]),
    ("blood_bank", "blood bank", "bloodbank", [
        ("donation", "donations", "DON", [("donor", "person"), ("blood_type", "enum:A+|A-|B+|B-|AB+|AB-|O+|O-"),
                                           ("donated_on", "date")]),
        ("blood_unit", "blood units", "BU", [("donation_id", "ref:DON"), ("volume_ml", "int:100:500"), ("expires_on", "date")])],
     [("quarantine", 1, [("reason", "text")], "quarantine a blood unit")]),
    ("podcast_network", "podcast network", "podcasts", [
        ("episode", "episodes", "EP", [("show", "title"), ("host", "person"), ("publish_at", "datetime"),
                                        ("explicit", "bool")]),
        ("sponsor_slot", "sponsor slots", "SPS", [("episode_id", "ref:EP"), ("sponsor", "title"), ("seconds", "int:15:180")])],
     [("transcribe", 0, [("language", "enum:en|de|fr|es|pt")], "order a transcript of an episode")]),
    ("escape_rooms", "escape room venue", "escaperooms", [
        ("room_booking", "room bookings", "ERB", [("room", "title"), ("team_size", "int:2:12"), ("starts_at", "datetime"),
                                                  ("organizer_email", "email")]),
        ("clue", "clues", "CLU", [("room", "title"), ("text", "text"), ("order", "int:1:30")])],
     [("reset_room", 0, [("staff", "person")], "reset a room after a game")]),
]

BY_ID = {f[0]: f for f in FAMILIES}
assert all(h in BY_ID for h in HELD_OUT_FAMILIES), "HELD_OUT_FAMILIES names an unknown family"
assert len(BY_ID) == len(FAMILIES), "duplicate family id"
TRAIN_FAMILIES = tuple(f[0] for f in FAMILIES if f[0] not in HELD_OUT_FAMILIES)

# Verb classes: the synonym a family's tool name uses is fixed by the family id; queries say the
# class with any of its synonyms.
VERB_NAMES = {
    "get": ["get", "fetch", "read", "describe", "show", "lookup"],
    "list": ["list", "search", "find", "query", "browse"],
    "create": ["create", "add", "register", "new", "open"],
    "update": ["update", "edit", "modify", "patch", "change"],
    "delete": ["delete", "remove", "archive", "cancel", "close"],
}


def object_nouns():
    """noun -> family id, for every object of every family; nouns are unique across families."""
    out = {}
    for fid, _, _, objects, _ in FAMILIES:
        for o in objects:
            assert o[0] not in out, f"object noun {o[0]!r} in two families"
            out[o[0]] = fid
    return out


OBJECT_NOUN_FAMILY = object_nouns()


# ---- values ----------------------------------------------------------------------------------------

SYL = ["ka", "ri", "mon", "vel", "dor", "an", "bel", "sto", "lin", "gar", "ve", "nu", "tal", "es", "por", "hal",
       "mi", "sen", "ou", "bra", "ken", "lo", "zar", "fi", "del", "ham", "ost", "wyn", "cor", "ta", "ber", "gen",
       "vik", "sa", "rom", "ley", "ul", "dra", "pe", "nor", "qui", "jo", "tse", "ama", "ilo", "ruk", "pha", "ez"]
GIVEN = ["Ada", "Omar", "Priya", "Jonas", "Mei", "Carlos", "Aisha", "Tomas", "Ingrid", "Kofi", "Lucia", "Dmitri",
         "Hana", "Felix", "Nadia", "Arjun", "Sofia", "Mateo", "Yara", "Erik", "Leila", "Bruno", "Zoe", "Ravi",
         "Noor", "Kenji", "Amara", "Lars", "Fatima", "Diego", "Olga", "Tariq", "Wen", "Elif", "Pablo", "Sione"]
REGION = ["", "", ", CA", ", TX", ", NY", ", Norway", ", Italy", ", Japan", ", Chile", ", ON", ", Kenya", ", Spain",
          ", UK", ", Peru", ", Austria", ", Brazil", ", India", ", NZ", ", Ghana", ", Poland", ", Vietnam"]
PLACE_END = ["", "", "burg", "ton", "ville", "stad", "ford", " Bay", " Springs", "holm", "field", "mouth", " Harbour"]
ADJ = ["quarterly", "north", "blue", "final", "spring", "winter", "evening", "silver", "old", "grand", "little",
       "red", "autumn", "second", "eastern", "quiet", "golden", "rapid", "green", "late"]
NOUN = ["meadow", "harbour", "lantern", "orchard", "river", "summit", "garden", "falcon", "comet", "willow",
        "bridge", "canyon", "island", "anchor", "forest", "violin", "mirror", "compass", "pebble", "thunder"]
DOMAINS = ["example.com", "example.org", "mail.test", "corp.example", "studio.test"]
TIME_OFFSETS = ["+00:00", "+01:00", "+02:00", "-05:00", "-08:00", "+09:00", "+05:30", "-03:00"]


def cap(s):
    return s[:1].upper() + s[1:]


def made_up(rng, lo=2, hi=3):
    return "".join(rng.choice(SYL) for _ in range(rng.randint(lo, hi)))


def v_person(rng):
    return f"{rng.choice(GIVEN)} {cap(made_up(rng))}"


def v_place(rng):
    return cap(made_up(rng) + rng.choice(PLACE_END)) + rng.choice(REGION)


def v_title(rng):
    w = [rng.choice(ADJ)] if rng.random() < 0.6 else []
    w += [rng.choice(NOUN)] + ([cap(made_up(rng, 2, 2))] if rng.random() < 0.3 else [])
    t = " ".join(w)
    return cap(t) if rng.random() < 0.6 else t


def v_text(rng):
    return rng.choice([
        lambda: f"{rng.choice(['left', 'found', 'moved', 'checked'])} near the {rng.choice(NOUN)} {rng.choice(['gate', 'door', 'shed', 'desk'])}",
        lambda: f"{rng.choice(GIVEN)} says the {rng.choice(NOUN)} is {rng.choice(['late', 'broken', 'ready', 'missing', 'fine'])}",
        lambda: f"{rng.choice(['customer', 'owner', 'staff', 'auditor'])} request {rng.randint(2, 999)}",
        lambda: f"{rng.choice(ADJ)} {rng.choice(NOUN)} {rng.choice(['issue', 'mix-up', 'delay', 'check'])}",
    ])()


def v_code(rng):
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    shape = rng.choice(["LLd-ddd", "Ldd-LL", "LLL-dddd", "dLL-dd", "LLdddL"])
    return "".join(rng.choice(letters) if c == "L" else str(rng.randint(0, 9)) if c == "d" else c for c in shape)


def v_id(rng, prefix):
    return f"{prefix}-{rng.randint(100, 999999)}"


def v_email(rng):
    return f"{rng.choice(GIVEN).lower()}.{made_up(rng, 2, 2)}{rng.choice(['', '', str(rng.randint(1, 99))])}@{rng.choice(DOMAINS)}"


def v_date(rng):
    return f"{rng.choice([2026, 2026, 2027])}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def v_datetime(rng):
    return f"{v_date(rng)}T{rng.randint(6, 21):02d}:{rng.choice(['00', '15', '30', '45'])}:00{rng.choice(TIME_OFFSETS)}"


# ---- schemas ---------------------------------------------------------------------------------------

def words(name):
    return re.sub(r"[_.\-]+", " ", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)).strip().lower()


def schema_of(kind, attr, noun):
    """JSON schema of an attribute (descriptions reworded later)."""
    w = words(attr)
    if kind.startswith("int:") or kind.startswith("num:"):
        lo, hi = (float(x) for x in kind[4:].split(":"))
        t = "integer" if kind.startswith("int:") else "number"
        cast = int if t == "integer" else (lambda x: int(x) if x == int(x) else x)
        return {"type": t, "description": f"The {w} of the {noun}.", "minimum": cast(lo), "maximum": cast(hi)}
    if kind.startswith("enum:"):
        return {"type": "string", "enum": kind[5:].split("|"), "description": f"The {w}."}
    if kind == "bool":
        return {"type": "boolean", "description": f"Whether the {noun} is {w}." if " " not in w else f"{cap(w)}."}
    if kind in ("tags", "emails"):
        item = "e-mail address" if kind == "emails" else "value"
        return {"type": "array", "items": {"type": "string"}, "description": f"The {w}, one {item} each."}
    if kind == "window":
        return {"type": "object", "description": f"The {w} as a date range.",
                "properties": {"start": {"type": "string", "description": "First day, YYYY-MM-DD."},
                               "end": {"type": "string", "description": "Last day, YYYY-MM-DD."}},
                "required": ["start", "end"]}
    if kind == "lines":
        return {"type": "array", "description": f"The {w}.",
                "items": {"type": "object", "properties": {"code": {"type": "string", "description": "Item code."},
                                                           "quantity": {"type": "integer", "minimum": 1, "maximum": 999}},
                          "required": ["code", "quantity"]}}
    hint = {"date": " (YYYY-MM-DD)", "datetime": " (ISO 8601 with offset)", "email": " (e-mail address)"}.get(kind, "")
    if kind.startswith("ref:"):
        return {"type": "string", "description": f"ID of the {w[:-3] if w.endswith(' id') else w}, like {kind[4:]}-1234."}
    return {"type": "string", "description": f"The {w}{hint}."}


class Tool:
    """One synthetic tool: a family's (verb class, object) with its canonical snake_case name."""

    def __init__(self, family, vclass, obj_index, name, params, required, action=None):
        self.family, self.vclass, self.obj_index = family, vclass, obj_index
        self.name, self.params, self.required, self.action = name, params, required, action

    @property
    def obj(self):
        return BY_ID[self.family][3][self.obj_index]

    @property
    def server(self):
        return BY_ID[self.family][2]

    def __repr__(self):
        return f"Tool({self.family}:{self.name})"


def family_tools(fid):
    """The family's tools, a function of its id only."""
    _, domain, server, objects, actions = BY_ID[fid]
    rng = random.Random("family:" + fid)
    tools = []
    for oi, (noun, plural, prefix, attrs) in enumerate(objects):
        id_param = noun + "_id"
        classes = ["get", "list", "create", "update", "delete"]
        # each object drops one or two classes (not get), so that unsupported verbs exist in a family
        for c in rng.sample(classes[1:], rng.choice([1, 1, 2])):
            classes.remove(c)
        for vc in classes:
            verb = rng.choice(VERB_NAMES[vc])
            obj_name = plural if vc == "list" else noun
            name = f"{verb}_{obj_name.replace(' ', '_').replace('-', '_')}"
            if vc == "get":
                params = [(id_param, f"ref:{prefix}")]
                if rng.random() < 0.4:
                    params.append(("include_history", "bool"))
                req = [id_param]
            elif vc == "list":
                filt = [a for a in attrs if not a[1].startswith(("tags", "emails", "window", "lines"))]
                params = rng.sample(filt, min(len(filt), rng.choice([1, 2, 2])))
                params.append(("limit", "int:1:100"))
                req = []
            elif vc == "create":
                params = list(attrs)
                req = [a for a, _ in attrs[:rng.choice([1, 2, 2, 3])]]
            elif vc == "update":
                params = [(id_param, f"ref:{prefix}")] + [a for a in attrs if not a[1].startswith("ref:")]
                req = [id_param]
            else:
                params = [(id_param, f"ref:{prefix}")] + ([("reason", "text")] if rng.random() < 0.5 else [])
                req = [id_param]
            tools.append(Tool(fid, vc, oi, name, params, req))
    for verb, oi, extra, what in actions:
        noun, _, prefix, _ = objects[oi]
        id_param = noun + "_id"
        name = f"{verb}_{noun}" if "_" not in verb else verb
        params = [(id_param, f"ref:{prefix}")] + list(extra)
        req = [id_param] + [a for a, k in extra[:1] if rng.random() < 0.7]
        tools.append(Tool(fid, "action", oi, name, params, req, action=(verb, what)))
    names = [t.name for t in tools]
    assert len(set(names)) == len(names), f"{fid}: duplicate tool names {names}"
    return tools


ALL_TOOLS = {fid: family_tools(fid) for fid in BY_ID}

GET_DESC = ["Get one {noun} by its ID.", "Returns the full record of a single {noun}.",
            "Look up a {noun} in the {domain} system and return its details.", "Fetch a {noun} record.",
            "Retrieve a {noun}, given its identifier."]
LIST_DESC = ["List {plural}, optionally filtered.", "Search the {domain} records for {plural} matching the filters.",
             "Returns {plural} that match all given filters (newest first).", "Find {plural}.",
             "Query {plural} in {domain}; every filter is optional."]
CREATE_DESC = ["Create a new {noun}.", "Register a {noun} in the {domain} system.", "Adds a {noun} record and returns its ID.",
               "Open a new {noun}.", "Create a {noun} with the given fields."]
UPDATE_DESC = ["Update fields of an existing {noun}.", "Change one or more properties of a {noun}.",
               "Edit a {noun}; only the given fields change.", "Modify a {noun} record."]
DELETE_DESC = ["Delete a {noun}.", "Remove a {noun} from the {domain} system.", "Permanently deletes the {noun}.",
               "Cancel or archive a {noun} so it no longer shows up."]
ACTION_DESC = ["{What}.", "{What} ({domain}).", "Use this to {what}.", "{What}; returns the updated {noun}."]
DESC = {"get": GET_DESC, "list": LIST_DESC, "create": CREATE_DESC, "update": UPDATE_DESC, "delete": DELETE_DESC,
        "action": ACTION_DESC}


def camel(s):
    parts = [p for p in re.split(r"[_\-. ]+", s) if p]
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else s


def tool_schema(tool, rng, camel_params=False):
    """The tool as an OpenAI-style function dict, description and parameter texts reworded."""
    _, domain, _, objects, _ = BY_ID[tool.family]
    noun, plural, _, _ = objects[tool.obj_index]
    nw, pw = noun.replace("_", " "), plural.replace("_", " ")
    what = tool.action[1] if tool.action else ""
    desc = rng.choice(DESC[tool.vclass]).format(noun=nw, plural=pw, domain=domain, what=what, What=cap(what))
    props = {}
    for attr, kind in tool.params:
        s = schema_of(kind, attr, nw)
        if rng.random() < 0.25:
            s.pop("description")
        elif attr == "limit":
            s["description"] = rng.choice(["Maximum number of results.", "How many to return at most.", "Page size."])
        props[pkey(attr, camel_params)] = rekey(s, camel_params)
    params = {"type": "object", "properties": props}
    params["required"] = [pkey(a, camel_params) for a in tool.required]
    return {"name": tool.name, "description": desc, "parameters": params}


def pkey(k, camel_params):
    return camel(k) if camel_params else k


def rekey(s, camel_params):
    if not camel_params or not isinstance(s, dict):
        return s
    s = dict(s)
    if "properties" in s:
        s["properties"] = {pkey(k, True): rekey(v, True) for k, v in s["properties"].items()}
        s["required"] = [pkey(k, True) for k in s.get("required", [])]
    if "items" in s:
        s["items"] = rekey(s["items"], True)
    return s


# ---- queries ---------------------------------------------------------------------------------------

def value_for(rng, kind, attr):
    """(JSON value, how the query says it): the query always contains the value verbatim."""
    if kind.startswith("ref:"):
        v = v_id(rng, kind[4:])
        return v, v
    if kind.startswith("int:") or kind.startswith("num:"):
        lo, hi = (float(x) for x in kind[4:].split(":"))
        if kind.startswith("int:"):
            v = rng.randint(int(lo), int(hi))
        else:
            v = round(rng.uniform(lo, hi), rng.choice([0, 1, 2]))
            if v == int(v):
                v = int(v) if rng.random() < 0.5 else float(v)
        return v, str(v)
    if kind.startswith("enum:"):
        v = rng.choice(kind[5:].split("|"))
        return v, (v if rng.random() < 0.7 else f"'{v}'")
    if kind == "bool":
        v = rng.random() < 0.5
        return v, rng.choice(["yes", "true"] if v else ["no", "false"])
    if kind == "tags":
        v = [rng.choice([v_code, v_title])(rng) for _ in range(rng.choice([1, 2, 3]))]
        return v, ", ".join(f"'{x}'" for x in v) if rng.random() < 0.5 else " and ".join(v)
    if kind == "emails":
        v = [v_email(rng) for _ in range(rng.choice([1, 2, 3]))]
        return v, ", ".join(v)
    if kind == "window":
        a, b = sorted([v_date(rng), v_date(rng)])
        return {"start": a, "end": b}, rng.choice([f"from {a} to {b}", f"{a} to {b}", f"between {a} and {b}"])
    if kind == "lines":
        v = [{"code": v_code(rng), "quantity": rng.randint(1, 40)} for _ in range(rng.choice([1, 2]))]
        return v, " and ".join(f"{x['quantity']} x {x['code']}" for x in v)
    gen = {"person": v_person, "place": v_place, "title": v_title, "text": v_text, "code": v_code,
           "email": v_email, "date": v_date, "datetime": v_datetime}[kind]
    v = gen(rng)
    quoted = kind in ("title", "text") and rng.random() < 0.6 or kind == "code" and rng.random() < 0.2
    return v, (f"\"{v}\"" if quoted and rng.random() < 0.5 else f"'{v}'" if quoted else v)


def say_arg(rng, attr, said):
    w = words(attr)
    if w.endswith(" id"):
        w = w[:-3] + rng.choice([" ID", " id", " number", ""])
    if said in ("yes", "no", "true", "false"):
        return rng.choice([f"{w}: {said}", f"{w} = {said}", f"{w} set to {said}"])
    return rng.choice([f"{w} {said}", f"{w}: {said}", f"{w} {said}", f"{w} = {said}", f"with {w} {said}",
                       f"{w} set to {said}", f"{said} as the {w}"])


# openers for any request; POLITE ones only before a request that starts with its verb
OPENERS = ["", "", "", "", "Quick one: ", "hey, ", "For the audit, ", "Hi! ", "ok so ", "Team asked me to ask: "]
POLITE = ["Please ", "Can you ", "Could you ", "I need you to ", "When you get a chance, ", "Right away: "]
ENDS = ["", "", ".", ".", " please.", ", thanks.", " asap.", " - cheers", "!"]
NOT_IMPERATIVE = ("what", "which", "any ", "i ", "i'm", "can ", "could ", "please", "time ", "new ", "is ", "why",
                  "how", "who", "before", "don't", "thanks", "let's", "{n}", "{id}", "{p}", "on ")

GET_Q = ["show me {n} {id}", "pull up {n} {id}", "what do we have on {n} {id}", "look up the {n} with ID {id}",
         "I need the details of {n} {id}", "fetch {id}, it's a {n}", "open the record for {n} {id}",
         "what's the current state of {n} {id}", "give me everything about {n} {id}", "{id} - which {n} is that? details please"]
LIST_Q = ["list {p} {f}", "find all {p} {f}", "which {p} are there {f}", "search {p} {f}", "show every {n} {f}",
          "I'm looking for {p} {f}", "any {p} {f}", "pull the {p} {f}"]
CREATE_Q = ["create a {n} with {a}", "add a new {n}: {a}", "register a {n} - {a}", "set up a {n} for {a}",
            "new {n}, {a}", "log a {n} with {a}", "I want to open a {n}: {a}", "make a {n} ({a})"]
UPDATE_Q = ["update {n} {id}: {a}", "change {n} {id} so that {a}", "on {n} {id}, set {a}", "{n} {id} needs {a}",
            "edit {id} ({n}) - {a}", "modify the {n} {id}, {a}"]
DELETE_Q = ["delete {n} {id}{r}", "remove {n} {id}{r}", "get rid of {n} {id}{r}", "cancel the {n} {id}{r}",
            "{n} {id} should be deleted{r}", "drop {n} {id}{r}", "archive {n} {id}{r}"]
ACTION_Q = ["{v} {n} {id}{a}", "I need to {v} {n} {id}{a}", "please {v} the {n} {id}{a}", "can you {v} {id} ({n}){a}",
            "time to {v} {n} {id}{a}", "{n} {id}: {v} it{a}"]


def query_for(rng, tool, camel_params=False):
    """A request for `tool` and the expected call (arguments keyed as the schema shown keys them)."""
    _, domain, _, objects, _ = BY_ID[tool.family]
    noun, plural, _, _ = objects[tool.obj_index]
    n, p = noun.replace("_", " "), plural.replace("_", " ")
    args, said = {}, []
    id_attr = tool.params[0][0] if tool.params and tool.params[0][0] == noun + "_id" else None
    id_said = None
    chosen = [a for a in tool.params if a[0] in tool.required]
    optional = [a for a in tool.params if a[0] not in tool.required]
    rng.shuffle(optional)
    n_opt = rng.choice([0, 0, 1, 1, 2])
    if tool.vclass in ("list", "update") and not [a for a in chosen if a[0] != id_attr]:
        n_opt = max(n_opt, 1)   # an update changes something; a list has at least one filter
    chosen += optional[:n_opt]
    for attr, kind in chosen:
        v, s = value_for(rng, kind, attr)
        args[pkey(attr, camel_params)] = rekey_value(v, camel_params)
        if attr == id_attr:
            id_said = s
        else:
            said.append((attr, s))
    extras = [say_arg(rng, a, s) for a, s in said]
    joined = rng.choice([", ", " and ", "; "]).join(extras)
    if tool.vclass == "get":
        tmpl, f = rng.choice(GET_Q), dict(n=n, id=id_said)
        if joined:
            tmpl, f["a"] = tmpl + " - {a}", joined
    elif tool.vclass == "list":
        f = " and ".join(rng.choice([f"where {words(a)} is {s}", f"with {words(a)} {s}", f"whose {words(a)} is {s}",
                                     f"{words(a)} = {s}"]) if a != "limit" else f"(at most {s})" for a, s in said)
        tmpl, f = rng.choice(LIST_Q), dict(n=n, p=p, f=f)
    elif tool.vclass == "create":
        tmpl, f = rng.choice(CREATE_Q), dict(n=n, a=joined)
    elif tool.vclass == "update":
        tmpl, f = rng.choice(UPDATE_Q), dict(n=n, id=id_said, a=joined)
    elif tool.vclass == "delete":
        r = rng.choice([" because ", ", reason: ", " - reason "]) + said[0][1] if said else ""
        tmpl, f = rng.choice(DELETE_Q), dict(n=n, id=id_said, r=r)
    else:
        verb, what = tool.action
        # the action's own verb, or the start of what it does ("set the alert thresholds of")
        lead = re.split(r" (?:a|an) ", what)[0]
        v = verb if "_" not in verb and rng.random() < 0.6 else lead
        a = (rng.choice([" with ", ", ", " - ", ": "]) + joined) if joined else ""
        tmpl, f = rng.choice(ACTION_Q), dict(v=v, n=n, id=id_said, a=a)
    return finish(rng, tmpl, **f), {"name": tool.name, "arguments": args}


def leaves(v):
    if isinstance(v, dict):
        return [x for y in v.values() for x in leaves(y)]
    if isinstance(v, list):
        return [x for y in v for x in leaves(y)]
    return [v]


def values_in_query(q, args):
    """True when every string and number of the arguments appears verbatim in the query."""
    return all(isinstance(v, bool) or str(v) in q for v in leaves(args))


def rekey_value(v, camel_params):
    if not camel_params:
        return v
    if isinstance(v, dict):
        return {pkey(k, True): rekey_value(x, True) for k, x in v.items()}
    if isinstance(v, list):
        return [rekey_value(x, True) for x in v]
    return v


def finish(rng, tmpl, **fields):
    """The template filled in, with an opener and an ending that fit how it starts."""
    q = re.sub(r"\b([Aa]) (?=[aeio])", r"\1n ", tmpl.format(**fields))   # "a appointment"
    imperative = not tmpl.lower().startswith(NOT_IMPERATIVE)
    question = q.endswith("?")
    o = rng.choice(OPENERS + (POLITE if imperative else []))
    q = o + q if o else cap(q)
    if question:
        return q
    if o in ("Can you ", "Could you "):
        return q + rng.choice(["?", "?", " please?"])
    return q + rng.choice(ENDS)


# ---- no-tool requests ------------------------------------------------------------------------------

# (nothing a bundled tool could do either: no e-mail, messages or posts)
UNSUPPORTED = ["export {n} {id} to PDF", "print {n} {id} for me", "merge {n} {id} into {id2}",
               "duplicate {n} {id}", "restore the deleted {n} {id}", "lock {n} {id} so nobody can edit it",
               "undo the last change to {n} {id}", "subscribe me to every change on {n} {id}",
               "move {n} {id} to another account", "give {n} {id} a five-star rating"]
CLASS_Q = {"delete": ["delete {n} {id}", "remove {n} {id} for good"], "create": ["create a new {n} called {t}", "add a {n} named {t}"],
           "update": ["change the {n} {id}'s details", "edit {n} {id}"], "list": ["list all {p}", "show me every {n} we have"],
           "get": ["show me {n} {id}", "pull up {n} {id}"]}


def unsupported_request(rng, offered):
    """A request with an offered tool's noun and a verb no offered tool supports, or None.
    `offered` is the list of synthetic Tools in the context."""
    if not offered:
        return None
    t = rng.choice(offered)
    fam_objects = BY_ID[t.family][3]
    noun, plural, prefix, _ = fam_objects[t.obj_index]
    n, p = noun.replace("_", " "), plural.replace("_", " ")
    have = {x.vclass for x in offered if x.family == t.family and x.obj_index == t.obj_index}
    missing = [c for c in ("delete", "create", "list") if c not in have]
    ident, ident2 = v_id(rng, prefix), v_id(rng, prefix)
    if missing and rng.random() < 0.5:
        tmpl = rng.choice(CLASS_Q[rng.choice(missing)])
    else:
        tmpl = rng.choice(UNSUPPORTED)
    return finish(rng, tmpl, n=n, p=p, id=ident, id2=ident2, t=v_title(rng))


DOMAIN_Q = ["how does {d} usually work?", "what's a typical lifespan of a {n}?", "any tips for keeping {p} organised?",
            "why would a {n} need a {a}?", "explain what a {n} is, in the context of {d}.",
            "is it normal for {p} to have no {a}?", "what's the difference between a {n} and a {n2}?",
            "what skills do people working in {d} need?", "write a short poem about {p}.",
            "what are common mistakes in {d}?", "how did {d} work before computers?",
            "give me three fun facts about {p}.", "what does '{a}' mean for a {n}?"]
META_Q = ["what does the {tool} tool do?", "which parameters does {tool} take?", "don't call anything yet - what would {tool} need from me?",
          "is {tool} safe to use on real data?", "how many tools do you have right now?", "what can you do with {p}?",
          "before we start: do you have a tool for {d}?", "why do you have a tool called {tool}?",
          "can you explain the difference between {tool} and {tool2}?", "what did I ask you a minute ago?",
          "let's start over.", "thanks, that's everything for the {p} today.", "who made the {tool} tool?"]


def domain_question(rng, fid):
    _, d, _, objects, _ = BY_ID[fid]
    o = rng.choice(objects)
    o2 = rng.choice(objects)
    attrs = [a for a, k in o[3] if not k.startswith("ref:")] or ["status"]
    return finish(rng, rng.choice(DOMAIN_Q), d=d, n=o[0].replace("_", " "), p=o[1], n2=o2[0].replace("_", " "),
                  a=words(rng.choice(attrs)))


def meta_question(rng, fid, tool_names):
    _, d, _, objects, _ = BY_ID[fid]
    o = rng.choice(objects)
    t1, t2 = rng.choice(tool_names), rng.choice(tool_names)
    return finish(rng, rng.choice(META_Q), tool=t1, tool2=t2, d=d, p=o[1])


# ---- name styles -----------------------------------------------------------------------------------

STYLES = ("snake", "camel", "kebab", "dotted", "mcp", "mcp_claude")
BUNDLED_SERVERS = ["workspace", "assistant", "tools", "office", "travel_hub", "utils", "core", "acme_api", "helper"]


def name_words(name):
    return [w for w in words(name).split() if w]


def styled(name, style, group):
    """A tool name in another style. `group` is the server / namespace (MCP prefix, dotted head)."""
    ws = name_words(name)
    if not ws:
        return name
    snake = "_".join(ws)
    if style == "snake":
        out = snake
    elif style == "camel":
        out = ws[0] + "".join(w[:1].upper() + w[1:] for w in ws[1:])
    elif style == "kebab":
        out = "-".join(ws)
    elif style == "dotted":
        out = name if "." in name else f"{group}.{snake}"
    elif style == "mcp":
        out = f"{group}__{name}"
    else:
        out = f"mcp__{group}__{name}"
    return out


NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")


def restyle(names_groups, style):
    """{old name: new name} for a context, or None when the style would make names collide or invalid."""
    out = {}
    for n, g in names_groups:
        m = styled(n, style, re.sub(r"[^A-Za-z0-9_-]", "_", g))
        if not NAME_RE.match(m):
            return None
        out[n] = m
    if len(set(out.values())) != len(out):
        return None
    return out


# ---- the hold-out check ----------------------------------------------------------------------------

def held_out_markers():
    """Word tuples of held-out tool names and lower-case noun phrases of held-out objects."""
    names, phrases = set(), set()
    for fid in HELD_OUT_FAMILIES:
        for t in ALL_TOOLS[fid]:
            names.add(tuple(name_words(t.name)))
        _, d, _, objects, _ = BY_ID[fid]
        phrases.add(d.lower())
        for noun, plural, _, _ in objects:
            phrases.add(noun.replace("_", " ").lower())
            phrases.add(plural.replace("_", " ").lower())
    return names, phrases


class FamilyHoldOut:
    """Asserts that no held-out family's tool name (in any style) or noun phrase reaches a training
    tool's name or description."""

    def __init__(self, bfcl_held=()):
        """bfcl_held: the held-out BFCL functions, {name: description} (or names alone)."""
        self.names, phrases = held_out_markers()
        self.bfcl = dict(bfcl_held) if isinstance(bfcl_held, dict) else {n: None for n in bfcl_held}
        # single-word nouns ("hive", "loan") match whole words only
        self.phrase_re = re.compile(r"\b(" + "|".join(sorted((re.escape(p) for p in phrases), key=len, reverse=True)) + r")\b")
        self.seen = set()
        self.n_checked = 0

    def check_tool(self, fn):
        key = (fn["name"], fn.get("description", ""))
        if key in self.seen:
            return
        self.seen.add(key)
        self.n_checked += 1
        ws = tuple(name_words(fn["name"]))
        for h in self.names:
            assert ws[-len(h):] != h, f"held-out tool name {'_'.join(h)} in training tool {fn['name']}"
        # (another tool may come to the same name once a name style is applied: BFCL's
        # `send.message` in snake case is `send_message`; only the held-out function itself is a leak)
        assert fn["name"] not in self.bfcl or self.bfcl[fn["name"]] not in (None, fn.get("description") or ""), \
            f"held-out BFCL function {fn['name']} in training data"
        text = (words(fn["name"]) + " " + (fn.get("description") or "")).lower()
        m = self.phrase_re.search(text)
        assert m is None, f"held-out family phrase {m.group(0)!r} in training tool {fn['name']}: {text[:200]!r}"
